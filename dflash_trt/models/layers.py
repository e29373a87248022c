"""Building blocks shared by the target and the drafter. Numerics follow transformers' Qwen3/Llama modules
(RMSNorm in float32, RoPE tables in float32 then cast) so the oracle tests can use tight tolerances."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' Qwen3/Llama RMSNorm: normalise in float32, cast back, then scale (`weight * x.to(dtype)`), bit for
    bit. One fused op in float32 (there the cast is a no-op and w * y == y * w); normalise-then-scale otherwise."""
    if x.dtype == torch.float32 and weight.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)
    return weight * F.rms_norm(x, weight.shape, None, eps)


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int, bias: bool = False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)
        self.gate_up: tuple[torch.Tensor, torch.Tensor | None] | None = None  # fused [gate; up], see fuse()

    def fuse(self) -> None:
        """One GEMM for gate and up: their weights become views of one [2I, H] tensor (what is loaded, saved and
        quantized is unchanged). Only for plain nn.Linear projections (not ModelOpt's or our quantized ones)."""
        self.gate_up = fuse_linears(self.gate_proj, self.up_proj)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up is not None and _plain(self.gate_proj, self.up_proj):
            gate, up = F.linear(x, *self.gate_up).chunk(2, dim=-1)
            return self.down_proj(F.silu(gate) * up)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def _plain(*modules: nn.Module) -> bool:
    return all(type(m) is nn.Linear for m in modules)


def fuse_linears(*linears: nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """(weight, bias) of the linears stacked along the output dimension, the linears' own parameters replaced by views
    into them; None if any is not a plain nn.Linear."""
    if not _plain(*linears):
        return None
    weight = torch.cat([m.weight.detach() for m in linears])
    has_bias = linears[0].bias is not None
    bias = torch.cat([m.bias.detach() for m in linears]) if has_bias else None
    start = 0
    for m in linears:
        rows = m.weight.shape[0]
        m.weight = nn.Parameter(weight[start: start + rows], requires_grad=False)
        if has_bias:
            m.bias = nn.Parameter(bias[start: start + rows], requires_grad=False)
        start += rows
    return weight, bias


class RotaryEmbedding(nn.Module):
    """cos/sin tables for absolute positions. Scaled variants (linear, llama3, yarn) come from transformers'
    ROPE_INIT_FUNCTIONS so the frequencies are exactly the ones the checkpoint was trained with."""

    def __init__(self, head_dim: int, rope: dict[str, Any], hf_config=None):
        super().__init__()
        rope_type = rope.get("rope_type", "default")
        if rope_type == "default":
            base = float(rope.get("rope_theta", 10000.0))
            inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
            self.attention_scaling = 1.0
        else:
            from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

            inv_freq, self.attention_scaling = ROPE_INIT_FUNCTIONS[rope_type](hf_config, "cpu")
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)
        self.table: tuple[torch.Tensor, torch.Tensor] | None = None  # see precompute()

    def _cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[..., None].float() * self.inv_freq
        cos = (freqs.cos() * self.attention_scaling).to(dtype)
        sin = (freqs.sin() * self.attention_scaling).to(dtype)
        return torch.cat((cos, cos), dim=-1), torch.cat((-sin, sin), dim=-1)

    def precompute(self, num_positions: int, dtype: torch.dtype) -> None:
        """Tables for positions 0..num_positions-1 in `dtype` (the engine's cache capacity): a forward then looks its
        positions up (one index each) instead of computing them; the values are the same, element for element."""
        positions = torch.arange(num_positions, device=self.inv_freq.device)
        self.table = self._cos_sin(positions, dtype)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [N, T] -> (cos, signed sin) [N, T, 1, head_dim] in `dtype`, ready for apply_rope: the sin's first
        half negated, so that rotate_half(x) * sin == x.roll(D/2) * signed sin, exactly."""
        if self.table is not None and self.table[0].dtype == dtype:
            cos, sin = self.table[0][positions], self.table[1][positions]
        else:
            cos, sin = self._cos_sin(positions, dtype)
        return cos[:, :, None], sin[:, :, None]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x [N, T, H, D]; cos/signed_sin [N, T, 1, D] from RotaryEmbedding. transformers' x * cos + rotate_half(x) * sin,
    with rotate_half(x) = cat(-x2, x1) written as roll(x, D/2) = cat(x2, x1) times the negated first half of sin: the
    same products, bit for bit, in 4 ops instead of 8."""
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * signed_sin


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, visible: torch.Tensor, scale: float) -> torch.Tensor:
    """q [N, T, Hq, D], k/v [N, S, Hkv, D], visible [N, T, S] bool -> [N, T, Hq*D]. GQA without copying K/V."""
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
        attn_mask=visible[:, None], scale=scale, enable_gqa=q.shape[2] != k.shape[2],
    )
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[1], -1)


class Attention(nn.Module):
    """Projections and norms of one attention layer; the target and drafter differ only in what they attend to."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, bias: bool, qk_norm: bool, eps: float):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.scale = head_dim**-0.5
        self.eps = eps
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=bias)
        self.q_norm = RMSNorm(head_dim, eps) if qk_norm else None
        self.k_norm = RMSNorm(head_dim, eps) if qk_norm else None
        self.qkv: tuple[torch.Tensor, torch.Tensor | None] | None = None  # fused [q; k; v], see fuse()
        self.qk_norm_weight: torch.Tensor | None = None  # [Hq + Hkv, D]: q_norm's weight per q head, then k_norm's

    def fuse(self) -> None:
        """One GEMM for q, k and v (their weights become views of one tensor), and one norm + one RoPE over the q and
        k heads together. Only for plain nn.Linear projections; numerics unchanged (the same products per element)."""
        self.qkv = fuse_linears(self.q_proj, self.k_proj, self.v_proj)
        if self.qkv is not None and self.q_norm is not None:
            self.qk_norm_weight = torch.cat([self.q_norm.weight.detach().expand(self.heads, -1),
                                             self.k_norm.weight.detach().expand(self.kv_heads, -1)])

    def project_qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x [N, T, hidden] -> q [N, T, Hq, D], k, v [N, T, Hkv, D] (q and k normed and rotated)."""
        n, t, h = x.shape[0], x.shape[1], self.heads
        if self.qkv is not None and _plain(self.q_proj, self.k_proj, self.v_proj):
            qkv = F.linear(x, *self.qkv).view(n, t, h + 2 * self.kv_heads, self.head_dim)
            qk, v = qkv[:, :, : h + self.kv_heads], qkv[:, :, h + self.kv_heads:]
            if self.qk_norm_weight is not None:
                qk = self.qk_norm_weight * F.rms_norm(qk, (self.head_dim,), None, self.eps)
            qk = apply_rope(qk, cos, sin)
            return qk[:, :, :h], qk[:, :, h:], v
        q = self.q_proj(x).view(n, t, h, self.head_dim)
        if self.q_norm is not None:
            q = self.q_norm(q)
        k, v = self.project_kv(x, cos, sin)
        return apply_rope(q, cos, sin), k, v

    def project_kv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [N, T, hidden] -> k (normed, rotated), v [N, T, Hkv, D]: the drafter's KV injection of context features."""
        n, t = x.shape[0], x.shape[1]
        if self.qkv is not None and _plain(self.k_proj, self.v_proj):
            weight, bias = self.qkv
            rows = self.heads * self.head_dim
            kv = F.linear(x, weight[rows:], bias[rows:] if bias is not None else None)
            kv = kv.view(n, t, 2 * self.kv_heads, self.head_dim)
            k, v = kv[:, :, : self.kv_heads], kv[:, :, self.kv_heads:]
        else:
            k = self.k_proj(x).view(n, t, self.kv_heads, self.head_dim)
            v = self.v_proj(x).view(n, t, self.kv_heads, self.head_dim)
        if self.k_norm is not None:
            k = self.k_norm(k)
        return apply_rope(k, cos, sin), v
