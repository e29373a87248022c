"""Quantized drafters: dflash-trt's loader (dflash_trt/models/quant.py) against NVIDIA ModelOpt's own numerics, and
the checks that refuse a broken quantized checkpoint.

* NVFP4: our E2M1 weight dequantization and per-16-block activation rounding are bit-exact with ModelOpt's
  NVFP4QTensor (its pure-torch reference), over magnitudes and ties.
* FP8: a drafter quantized and calibrated by ModelOpt (fake-quant forward, CPU) and the same drafter exported and
  loaded through our QuantLinear give the same outputs.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch

from dflash_trt import checkpoint as ckpt
from dflash_trt.errors import CheckpointError
from dflash_trt.models.drafter import DFlashDrafter
from dflash_trt.models.quant import (E2M1_VALUES, dequantize_fp8, dequantize_nvfp4, fake_quant_fp8, fake_quant_nvfp4,
                                     round_to_e2m1)

pytest.importorskip("modelopt", reason="nvidia-modelopt is not installed (pip install 'dflash-trt[quant]')")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor

ROOT = Path(__file__).resolve().parents[1]
PAIR = ROOT / "tests/fixtures/gsm8k-tiny"


def modelopt_nvfp4(x: torch.Tensor, global_scale: torch.Tensor):
    q, scale, scale_2 = NVFP4QTensor.quantize(x, 16, weights_scaling_factor_2=global_scale)
    return q, scale, scale_2, q.dequantize(dtype=torch.float32, scale=scale, double_scale=scale_2, block_sizes={-1: 16})


@pytest.mark.parametrize("magnitude", [1e-3, 1.0, 37.0, 5e3])
def test_nvfp4_matches_modelopt_bit_for_bit(magnitude):
    g = torch.Generator().manual_seed(int(magnitude * 1000) % 2**31)
    x = torch.randn(16, 512, generator=g) * magnitude
    x[0, :16] = 0.0  # an all-zero block
    x[1, :16] = torch.tensor(E2M1_VALUES[:8] * 2) * magnitude / 6  # values on the grid
    global_scale = x.abs().amax() / (6 * 448)
    q, scale, scale_2, reference = modelopt_nvfp4(x, global_scale)
    # activations: our fake quantization is what ModelOpt's NVFP4 quantize + dequantize does
    assert torch.equal(fake_quant_nvfp4(x, global_scale), reference)
    # weights: unpacking ModelOpt's packed codes and scales gives the same values
    assert torch.equal(dequantize_nvfp4(q._quantized_data, scale, scale_2, torch.float32), reference)


def test_e2m1_rounding_ties_go_to_the_even_code():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -2.5, 0.26, 6.0])
    assert round_to_e2m1(x).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, -0.0, -2.0, 0.5, 6.0]


def test_fp8_helpers():
    w = torch.randn(32, 64)
    scale = w.abs().amax() / 448
    q = (w / scale).to(torch.float8_e4m3fn)
    assert torch.equal(dequantize_fp8(q, scale, torch.float32), q.float() * scale)
    x = torch.tensor([1e6, -1e6, 0.5])
    out = fake_quant_fp8(x, torch.tensor(1.0))
    assert out.tolist() == [448.0, -448.0, 0.5]  # saturates instead of NaN


def test_fp8_drafter_matches_modelopt_fake_quant(tmp_path):
    """Quantize the fixture drafter with ModelOpt (calibrated on its engine's spec loop), run ModelOpt's fake-quant
    drafter on real inputs, export, load the export with dflash-trt's loader, run it on the same inputs."""
    from dflash_trt.build.quantize import quantize_drafter
    from dflash_trt.engines.torch_engine import TorchEngine

    engine = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", max_batch_size=4,
                                         max_seq_len=512)
    prompts = [[int(t) for t in engine.tokenizer(f"Question: {q}\nAnswer:", add_special_tokens=False)["input_ids"]]
               for q in ("Tom has 3 apples and buys 5 more. How many?", "A car drives 60 miles in 2 hours. Speed?")]
    d = engine.drafter
    n = len(d.cfg.target_layer_ids)
    g = torch.Generator().manual_seed(0)
    inputs = dict(block_embeds=engine.target.embed(torch.randint(2, 2048, (2, 16), generator=g)),
                  block_positions=torch.arange(20, 36).expand(2, 16),
                  context=torch.randn(2, 20, n * d.cfg.hidden_size, generator=g) * 3,
                  context_positions=torch.arange(20).expand(2, 20),
                  visible=torch.ones(2, 16, 36, dtype=torch.bool))
    out = tmp_path / "drafter"
    info = quantize_drafter(engine, "fp8", prompts, 32, [], None, out, progress=False)
    assert len(info["quantized_modules"]) == 1 + 7 * d.cfg.num_hidden_layers and info["quant_algo"] == "FP8"  # fc + 7 per layer
    # ModelOpt's export replaced the in-memory weights; compare against a fresh ModelOpt-quantized copy instead:
    engine2 = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", max_batch_size=4,
                                          max_seq_len=512)
    import modelopt.torch.quantization as mtq
    from dflash_trt.build.quantize import quant_config
    from dflash_trt.build.gate import run_prompts

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mtq.quantize(engine2.drafter, quant_config(mtq, "fp8", []),
                     lambda _m: run_prompts(engine2, prompts, 32, verify_len=None, desc="", progress=False))
    # Weights: the export's FP8 codes x scale are ModelOpt's fake-quantized weights, except at rounding ties (the export
    # divides by the stored float32 scale, the fake quant multiplies by 448/amax: one of the 2-layer fixture's 1.6M
    # weights lands a code apart). The reference then takes the export's weights, so the forward below compares the
    # rest — activation rounding and the GEMM — exactly.
    from safetensors import safe_open

    checked = 0
    with safe_open(str(out / "model.safetensors"), "pt") as f, torch.no_grad():
        for name, module in engine2.drafter.named_modules():
            if f"{name}.weight_scale" not in f.keys():
                continue
            scale = f.get_tensor(f"{name}.weight_scale").float()
            exported = f.get_tensor(f"{name}.weight").float() * scale
            fake = module.weight_quantizer(module.weight)
            apart = ~torch.isclose(exported, fake, rtol=1e-6, atol=0)
            assert apart.float().mean() < 1e-4, name
            codes = torch.maximum(exported[apart].abs(), fake[apart].abs()) / scale  # in units of the scale
            step = 2.0 ** (torch.floor(torch.log2(codes.clamp_min(2.0 ** -6))) - 3) * scale  # one e4m3 step there
            assert torch.all((exported[apart] - fake[apart]).abs() <= step * 1.01), name
            module.weight.copy_(exported)
            checked += 1
    assert checked == len(info["quantized_modules"])
    with torch.no_grad():
        reference = engine2.drafter.forward_train(**inputs)
        ours = DFlashDrafter.from_pretrained(out).forward_train(**inputs)
        unquantized = DFlashDrafter.from_pretrained(PAIR / "drafter").forward_train(**inputs)
    err = (ours - reference).abs().max().item()
    quant_effect = (unquantized - reference).abs().max().item()
    assert err < 1e-4 * reference.abs().max().item() + 1e-5, (err, quant_effect)
    assert quant_effect > 100 * err  # the comparison can tell quantized from unquantized


# ---- broken quantized checkpoints ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fp8_drafter(tmp_path_factory):
    from dflash_trt.build.quantize import quantize_drafter
    from dflash_trt.engines.torch_engine import TorchEngine

    engine = TorchEngine.from_pretrained(PAIR / "target", PAIR / "drafter", device="cpu", max_batch_size=2,
                                         max_seq_len=256)
    out = tmp_path_factory.mktemp("q") / "drafter"
    quantize_drafter(engine, "fp8", [[5, 6, 7, 8]], 8, ["fc"], None, out, progress=False)
    return out


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_unquantized_modules_stay_float(fp8_drafter):
    tensors = ckpt.load_safetensors_dir(fp8_drafter, "drafter")
    assert tensors["fc.weight"].dtype == torch.float32 and "fc.weight_scale" not in tensors
    assert tensors["layers.0.self_attn.q_proj.weight"].dtype == torch.float8_e4m3fn
    model = DFlashDrafter.from_pretrained(fp8_drafter)
    assert type(model.fc).__name__ == "Linear" and type(model.layers[0].self_attn.q_proj).__name__ == "QuantLinear"


def test_bad_quantized_checkpoints_are_refused(fp8_drafter, tmp_path):
    from safetensors.torch import load_file, save_file

    d = _copy(fp8_drafter, tmp_path / "scale")
    t = load_file(str(d / "model.safetensors"))
    t["layers.0.mlp.up_proj.weight_scale"] = torch.ones(3)
    save_file(t, str(d / "model.safetensors"))
    with pytest.raises(CheckpointError, match="'layers.0.mlp.up_proj.weight_scale' is float32 \\[3\\]; fp8 needs"):
        DFlashDrafter.from_pretrained(d)

    d = _copy(fp8_drafter, tmp_path / "missing")
    t = load_file(str(d / "model.safetensors"))
    del t["layers.0.mlp.up_proj.input_scale"]
    save_file(t, str(d / "model.safetensors"))
    with pytest.raises(CheckpointError, match="has no tensor 'layers.0.mlp.up_proj.input_scale'"):
        DFlashDrafter.from_pretrained(d)

    d = _copy(fp8_drafter, tmp_path / "algo")
    q = json.loads((d / "hf_quant_config.json").read_text())
    q["quantization"]["quant_algo"] = "W4A16_AWQ"
    (d / "hf_quant_config.json").write_text(json.dumps(q))
    with pytest.raises(CheckpointError, match="quant_algo 'W4A16_AWQ' is not supported"):
        ckpt.load_drafter_config(d)

    d = _copy(fp8_drafter, tmp_path / "noquant")
    (d / "hf_quant_config.json").unlink()
    cfg = json.loads((d / "config.json").read_text())
    del cfg["quantization_config"]
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="has dtype float8_e4m3fn"):
        DFlashDrafter.from_pretrained(d)  # fp8 tensors without a quantization config

    d = _copy(fp8_drafter, tmp_path / "garbled")
    (d / "hf_quant_config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not a ModelOpt quantization config"):
        ckpt.load_drafter_config(d)


@pytest.mark.gpu
def test_fp8_gemm_path_matches_the_dequantized_path(fp8_drafter):
    """On an sm_89+ GPU the FP8 linears run torch._scaled_mm; they must agree with the dequantize-and-fake-quant path
    (the same arithmetic up to accumulation order)."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs an FP8 GPU (sm_89+)")
    gpu = DFlashDrafter.from_pretrained(fp8_drafter, torch.bfloat16, "cuda")
    ref = DFlashDrafter.from_pretrained(fp8_drafter, torch.bfloat16, "cpu")
    q = gpu.layers[0].mlp.down_proj
    assert q.use_fp8_gemm
    x = torch.randn(7, q.in_features, dtype=torch.bfloat16) * 3
    got = q(x.cuda()).float().cpu()
    want = ref.layers[0].mlp.down_proj(x).float()
    assert (got - want).abs().max() <= 0.02 * want.abs().max() + 1e-3
