"""`dflash-trt build` for a gpt-oss target: the FP8 drafter calibrated and gated through the transformers-backed
target (models/hf_target.py), on the tiny random gpt-oss pair `dflash-trt make-tiny-pair --family gpt_oss` makes
(build_configs/tiny-gpt-oss-cpu.yaml, CPU, float32).

The drafter is random, so τ ≈ 1 before and after quantization: what is checked is that the build runs end to end
(calibration through the spec loop, export, gate, engine directory) and that the engine it writes is lossless."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from dflash_trt import checkpoint as ckpt
from dflash_trt.build.config import load_build_config
from dflash_trt.cli import main
from dflash_trt.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "build_configs/tiny-gpt-oss-cpu.yaml"

pytest.importorskip("modelopt", reason="nvidia-modelopt is not installed (pip install 'dflash-trt[quant]')")


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("gpt-oss") / "pair"
    assert main(["make-tiny-pair", "--family", "gpt_oss", "--output", str(out)]) == 0
    return out / "target", out / "drafter"


def build(pair, output: Path, *sets: str) -> int:
    target, drafter = pair
    argv = ["build", "--config", str(CONFIG), "--no-progress", "--set", f"target={target}", "--set",
            f"drafter={drafter}", "--set", f"output={output}"]
    for s in sets:
        argv += ["--set", s]
    return main(argv)


def test_make_tiny_pair_gpt_oss_equals_transformers_generate(pair):
    """The pair is a transformers GptOss checkpoint (safetensors, sliding/full layers, 4 experts top-2) and the
    engine runs it through HfTarget: AR and DFlash equal transformers' own greedy generate."""
    from transformers import AutoTokenizer, GenerationConfig, GptOssForCausalLM

    from dflash_trt.engines.torch_engine import TorchEngine
    from dflash_trt.models.hf_target import HfTarget
    from dflash_trt.spec.sampling import SamplingParams

    target_dir, drafter_dir = pair
    cfg = ckpt.load_target_config(target_dir)
    assert cfg.backend == "transformers" and cfg.family == "gpt_oss" and cfg.sliding_window == 8
    assert cfg.layer_types == ("sliding_attention", "full_attention") * 2 and cfg.hidden_size == 64
    assert (target_dir / "model.safetensors").is_file() and not list(target_dir.glob("*.bin"))
    drafter = ckpt.load_drafter_config(drafter_dir)
    assert drafter.target_layer_ids == [0, 2, 3]
    ckpt.check_pair(cfg, drafter, drafter_dir)
    raw = json.loads((target_dir / "config.json").read_text())
    assert (raw["num_local_experts"], raw["num_experts_per_tok"]) == (4, 2)

    tok = AutoTokenizer.from_pretrained(str(target_dir))
    ids = tok("Natalia sold clips to 48 of her friends in April.")["input_ids"]
    assert len(ids) > 8  # crosses the sliding window
    hf = GptOssForCausalLM.from_pretrained(str(target_dir)).eval()
    hf.generation_config = GenerationConfig()
    gen = GenerationConfig(max_new_tokens=24, do_sample=False, use_cache=True, eos_token_id=None, pad_token_id=None)
    with torch.no_grad():
        x = torch.tensor([ids])
        want = hf.generate(x, attention_mask=torch.ones_like(x), generation_config=gen)[0, len(ids):].tolist()
    engine = TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=1,
                                         max_seq_len=128)
    assert isinstance(engine.target, HfTarget)
    params = SamplingParams(max_new_tokens=24, ignore_eos=True)
    assert engine.generate([ids], params, use_drafter=False)[0].token_ids == want
    assert engine.generate([ids], params)[0].token_ids == want


def test_tiny_gpt_oss_build_calibrates_gates_and_runs(pair, tmp_path, capsys):
    """build_configs/tiny-gpt-oss-cpu.yaml with the pair in tmp: FP8 drafter calibrated through the transformers-backed
    target, gate recorded, `generate --engine-dir --check-ar` identical to AR."""
    cfg = load_build_config(CONFIG)  # as shipped: the pair where the config's comment makes it
    assert cfg.target == ROOT / "out/tiny-gpt-oss/target" and cfg.drafter == ROOT / "out/tiny-gpt-oss/drafter"
    assert (cfg.backend, cfg.device, cfg.dtype, cfg.quantization.format) == ("torch", "cpu", "float32", "fp8")

    engine_dir = tmp_path / "engine"
    assert build(pair, engine_dir) == 0
    out = capsys.readouterr().out
    assert "mean tau: unquantized" in out and "passed" in out
    m = load_manifest(engine_dir)
    assert m["backend"] == "torch" and m["drafter"]["quantization"] == "fp8"
    assert m["target"]["model_type"] == "gpt_oss" and m["target"]["path"] == str(pair[0].resolve())
    assert m["runtime"]["device"] == "cpu" and m["runtime"]["dtype"] == "float32"
    acc = m["acceptance"]
    assert acc["passed"] and acc["outputs_identical"] and acc["num_prompts"] == cfg.quantization.gate.num_prompts
    assert acc["first_prompt"] == cfg.quantization.calibration.num_samples  # held out from calibration
    # a random drafter: τ ≈ 1 both ways, so the relative drop is ≈ 0 and within the gate
    assert 1.0 <= acc["tau_unquantized"] < 1.1 and 1.0 <= acc["tau_quantized"] < 1.1
    assert acc["relative_tau_drop"] <= acc["max_tau_drop"] == cfg.quantization.gate.max_tau_drop
    assert len(m["drafter"]["modelopt"]["quantized_modules"]) == 15  # every linear of the 2-layer drafter (torch)
    assert yaml.safe_load((engine_dir / "build_config.yaml").read_text())["quantization"]["format"] == "fp8"

    code = main(["generate", "--engine-dir", str(engine_dir), "--prompt", "Natalia sold clips to 48 of her friends",
                 "--max-new-tokens", "24", "--check-ar", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["matches_ar"] == [True] and report["mode"] == "dflash"


def test_tiny_gpt_oss_trtllm_options(pair, tmp_path):
    """backend trtllm (bf16 on CPU): the gpt-oss drafter keeps fc and q/k/v in bf16 and the LLM API options name the
    gpt-oss target, the drafter and its taps."""
    from test_trtllm import check_class

    d = tmp_path / "trt"
    assert build(pair, d, "backend=trtllm", "dtype=bfloat16", "quantization.calibration.num_samples=2",
                 "quantization.gate.num_prompts=4", "quantization.gate.max_new_tokens=16") == 0
    m = load_manifest(d)
    assert m["backend"] == "trtllm" and m["drafter"]["quantization"] == "fp8" and m["acceptance"]["passed"]
    assert m["trtllm"] == {"llm_api_options": "trtllm/llm_api_options.yaml"} and m["triton"] is None
    options = yaml.safe_load((d / "trtllm/llm_api_options.yaml").read_text())
    assert check_class(options, "TorchLlmArgs") == []
    assert options["model"] == str(pair[0].resolve()) and options["dtype"] == "bfloat16"
    spec = options["speculative_config"]
    assert spec["speculative_model"] == str(d.resolve() / "drafter") and spec["max_draft_len"] == 15
    assert spec["target_layer_ids"] == [0, 2, 3]
    from dflash_trt.engines.trtllm_options import trtllm_exclude_modules

    hq = json.loads((d / "drafter/hf_quant_config.json").read_text())
    assert hq["quantization"]["exclude_modules"] == trtllm_exclude_modules(2)
