"""Quantized linear layers for drafters exported by ModelOpt (unified HF format, `hf_quant_config.json`).

Two formats, exactly as ModelOpt writes them:

* FP8 (`quant_algo: FP8`): `weight` float8_e4m3fn [out, in], `weight_scale` fp32 scalar (W = w * weight_scale),
  `input_scale` fp32 scalar (static per-tensor activation scale: x is quantized as x / input_scale to E4M3).
* NVFP4 (`quant_algo: NVFP4`, group 16): `weight` uint8 [out, in/2] holding two E2M1 codes per byte (element 2j in
  the low nibble, 2j+1 in the high one), `weight_scale` float8_e4m3fn [out, in/16] per-16-block scales,
  `weight_scale_2` fp32 scalar global scale (W = e2m1 * weight_scale * weight_scale_2), `input_scale` fp32 scalar
  (activations are quantized per 16-block at run time, block scales in E4M3 relative to input_scale).

Where the hardware has the format (FP8 on sm_89+ with torch._scaled_mm) the matmul runs in FP8. Everywhere else (CPU,
older GPUs, NVFP4 without a portable FP4 GEMM in torch) the weights are dequantized once at load and the activations
are fake-quantized with the same rule the FP8/FP4 GEMM applies, so τ measured here is the quantized drafter's τ, not
the unquantized one's.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from dflash_trt.capabilities import FP8_MIN_CAPABILITY

E4M3_MAX = 448.0
E2M1_MAX = 6.0
NVFP4_GROUP = 16
# E2M1 code -> value (bit 3 is the sign), the table ModelOpt's NVFP4QTensor uses.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)

FORMATS = ("fp8", "nvfp4")


# ---- dequantization (weights) --------------------------------------------------------------------------------------


def dequantize_fp8(weight: torch.Tensor, weight_scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (weight.float() * weight_scale.float()).to(dtype)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [..., n/2] -> float32 [..., n]: low nibble first."""
    codes = torch.stack([packed & 0x0F, packed >> 4], dim=-1).flatten(-2).long()
    return torch.tensor(E2M1_VALUES, device=packed.device)[codes]


def dequantize_nvfp4(weight: torch.Tensor, weight_scale: torch.Tensor, weight_scale_2: torch.Tensor,
                     dtype: torch.dtype) -> torch.Tensor:
    values = unpack_e2m1(weight)  # [out, in]
    scales = weight_scale.float() * weight_scale_2.float()  # [out, in/16]
    return (values * scales.repeat_interleave(NVFP4_GROUP, dim=-1)).to(dtype)


# ---- activation quantization (what the FP8 / FP4 GEMM does to its input) -------------------------------------------


def fake_quant_fp8(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Static per-tensor E4M3: clamp first (a float -> e4m3fn cast does not saturate, it makes NaN)."""
    q = (x.float() / scale.float()).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return (q.float() * scale.float()).to(x.dtype)


def round_to_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Round float32 values in [-6, 6] to the nearest E2M1 value, ties to the even code (as the FP4 cast does)."""
    grid = torch.tensor(E2M1_VALUES[:8], device=x.device)
    mag = x.abs()
    # distance to every grid point; ties broken towards the even code index (0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0 ...)
    dist = (mag[..., None] - grid).abs()
    best = dist.min(dim=-1, keepdim=True).values
    is_best = dist == best
    even = torch.arange(8, device=x.device) % 2 == 0
    ties = is_best.sum(-1, keepdim=True) > 1
    choice = torch.where(ties, is_best & even, is_best).float().argmax(-1)
    return torch.copysign(grid[choice], x)


def fake_quant_nvfp4(x: torch.Tensor, global_scale: torch.Tensor) -> torch.Tensor:
    """Dynamic NVFP4 activation quantization: per 16 values along the last dim, a block scale amax/6 stored in E4M3
    relative to the calibrated global scale (input_scale = amax / (6 * 448)), then values rounded to E2M1."""
    shape = x.shape
    xf = x.float().reshape(*shape[:-1], shape[-1] // NVFP4_GROUP, NVFP4_GROUP)
    g = global_scale.float()
    block_amax = xf.abs().amax(-1, keepdim=True)
    block_scale = (block_amax / E2M1_MAX / g).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn).float() * g
    safe = torch.where(block_scale > 0, block_scale, torch.ones_like(block_scale))
    q = round_to_e2m1((xf / safe).clamp(-E2M1_MAX, E2M1_MAX)) * block_scale
    return q.reshape(shape).to(x.dtype)


# ---- the layer ------------------------------------------------------------------------------------------------------


def fp8_matmul_supported(device: torch.device) -> bool:
    return (device.type == "cuda" and torch.cuda.get_device_capability(device) >= FP8_MIN_CAPABILITY
            and hasattr(torch, "_scaled_mm"))


class QuantLinear(nn.Module):
    """A bias-free Linear whose weight is stored quantized (FP8 or NVFP4), see the module docstring."""

    def __init__(self, fmt: str, tensors: dict[str, torch.Tensor], dtype: torch.dtype, device: torch.device):
        super().__init__()
        if fmt not in FORMATS:
            raise ValueError(f"unknown quantization format {fmt!r}")
        self.fmt = fmt
        self.register_buffer("input_scale", tensors["input_scale"].float().reshape(()).to(device))
        if fmt == "fp8":
            weight = dequantize_fp8(tensors["weight"], tensors["weight_scale"], dtype)
            self.use_fp8_gemm = fp8_matmul_supported(torch.device(device))
            if self.use_fp8_gemm:  # keep the FP8 weight for torch._scaled_mm; [out, in] row-major = column-major W^T
                self.register_buffer("weight_fp8", tensors["weight"].to(device))
                self.register_buffer("weight_scale", tensors["weight_scale"].float().reshape(()).to(device))
        else:
            weight = dequantize_nvfp4(tensors["weight"], tensors["weight_scale"], tensors["weight_scale_2"], dtype)
            self.use_fp8_gemm = False
        self.register_buffer("weight", weight.to(device))
        self.out_features, self.in_features = weight.shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_fp8_gemm:
            flat = x.reshape(-1, self.in_features)
            xq = (flat.float() / self.input_scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
            out = torch._scaled_mm(xq, self.weight_fp8.t(), scale_a=self.input_scale, scale_b=self.weight_scale,
                                   out_dtype=x.dtype)
            return out.reshape(*x.shape[:-1], self.out_features)
        if self.fmt == "fp8":
            x = fake_quant_fp8(x, self.input_scale)
        else:
            x = fake_quant_nvfp4(x, self.input_scale)
        return F.linear(x, self.weight)

    def extra_repr(self) -> str:
        path = "fp8 gemm" if self.use_fp8_gemm else "dequantized weight + fake-quantized input"
        return f"{self.fmt}, in={self.in_features}, out={self.out_features}, {path}"


def quantized_tensor_shapes(fmt: str, out_features: int, in_features: int) -> dict[str, tuple[tuple[int, ...], tuple[torch.dtype, ...]]]:
    """suffix -> (shape, allowed dtypes) of one quantized linear layer as ModelOpt exports it."""
    scalar = ((), (torch.float32,))
    if fmt == "fp8":
        return {"weight": ((out_features, in_features), (torch.float8_e4m3fn,)), "weight_scale": scalar,
                "input_scale": scalar}
    return {"weight": ((out_features, in_features // 2), (torch.uint8,)),
            "weight_scale": ((out_features, in_features // NVFP4_GROUP), (torch.float8_e4m3fn,)),
            "weight_scale_2": scalar, "input_scale": scalar}
