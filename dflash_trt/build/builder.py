"""`dflash-trt build`: from a checked plan to a complete engine directory, written atomically.

    1. drafter   copied as it is (quantization none), or: measure τ with the unquantized drafter on the gate prompts,
                 quantize it with ModelOpt (calibrated by the spec loop on the calibration prompts), export, load the
                 export through the normal drafter loader, measure τ again, and fail when it fell too far
    2. trtllm/   backend trtllm: the LLM API options (speculative_config DFlash, CUDA graphs, KV cache)
    3. triton/   backend torch: the Triton model repository `dflash serve` runs
    4. build_config.yaml (the resolved config), manifest.json (what was built, versions, checksums, measured τ and
       the served drafter's acceptance per draft position: the torch engine's "auto" budget starts from it)

Everything is written into a temporary directory beside the output, renamed into place only when every step
succeeded: a failed build (a bad checkpoint, a failed gate, Ctrl-C) leaves nothing behind, and `--force` replaces
an old engine directory only with a complete new one.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from dflash_trt import checkpoint as ckpt
from dflash_trt.build import gate as gate_mod
from dflash_trt.build.engine_dir import BUILD_CONFIG_NAME, TRITON_REPOSITORY, TRTLLM_OPTIONS, make_manifest
from dflash_trt.build.plan import BuildPlan, checkpoint_files, describe
from dflash_trt.manifest import MANIFEST_NAME


def _log(msg: str) -> None:
    print(f"dflash-trt build: {msg}", file=sys.stderr, flush=True)


def unquantized_modules(plan: BuildPlan) -> list[str]:
    from dflash_trt.engines.trtllm_options import bf16_checkpoint_modules

    return bf16_checkpoint_modules(plan.drafter.num_hidden_layers) if plan.config.keep_unquantized == "trtllm" else []


def exclude_modules(plan: BuildPlan) -> list[str] | None:
    """hf_quant_config.json `exclude_modules`: TensorRT-LLM's names for the modules kept unquantized (backend trtllm),
    else ModelOpt's own list."""
    from dflash_trt.engines.trtllm_options import trtllm_exclude_modules

    return trtllm_exclude_modules(plan.drafter.num_hidden_layers) if plan.config.keep_unquantized == "trtllm" else None


def _quantize_with_gate(plan: BuildPlan, drafter_out: Path, progress: bool) -> tuple[dict, dict]:
    from dflash_trt.engines.torch_engine import TorchEngine
    from dflash_trt.models.drafter import DFlashDrafter

    c, q = plan.config, plan.config.quantization
    # Calibration and gate prompts are short: a smaller KV cache than serving's leaves room on the build GPU.
    engine = TorchEngine.from_pretrained(c.target, c.drafter, device=plan.build_device, dtype=plan.dtype,
                                         max_batch_size=min(c.max_batch_size, 16), max_seq_len=min(c.max_seq_len, 4096))
    gate_ids = gate_mod.encode_prompts(engine, plan.gate.turns, q.gate.max_new_tokens)
    calib_ids = gate_mod.encode_prompts(engine, plan.calibration.turns, q.calibration.max_new_tokens)
    before = gate_mod.run_prompts(engine, gate_ids, q.gate.max_new_tokens, verify_len=plan.verify_len,
                                  desc="gate: unquantized", progress=progress)
    _log(f"mean tau unquantized: {round(before.mean_tau, 4):.3f} ({before.steps} steps, {len(gate_ids)} held-out prompts)")
    from dflash_trt.build.quantize import quantize_drafter

    info = quantize_drafter(engine, q.format, calib_ids, q.calibration.max_new_tokens, unquantized_modules(plan),
                            exclude_modules(plan), drafter_out, progress=progress)
    # Measure what will be served: the exported checkpoint through the normal loader, in the same engine.
    engine.replace_drafter(DFlashDrafter.from_pretrained(drafter_out, engine.target.lm_head.weight.dtype, engine.device))
    after = gate_mod.run_prompts(engine, gate_ids, q.gate.max_new_tokens, verify_len=plan.verify_len,
                                 desc=f"gate: {q.format}", progress=progress)
    result = gate_mod.verdict(before, after, q.gate.max_tau_drop)
    result.update({"prompts": str(plan.gate.path), "first_prompt": plan.gate.start, "num_prompts": plan.gate.count,
                   "max_new_tokens": q.gate.max_new_tokens, "verify_len": plan.verify_len,
                   "calibration": {"prompts": str(plan.calibration.path), "num_samples": plan.calibration.count,
                                   "max_new_tokens": q.calibration.max_new_tokens},
                   "device": str(engine.device), "dtype": plan.dtype})
    _log(f"mean tau {q.format}: {result['tau_quantized']:.3f} (drop {100 * result['relative_tau_drop']:.2f}%, allowed "
         f"{100 * q.gate.max_tau_drop:.2f}%): {'passed' if result['passed'] else 'FAILED'}")
    gate_mod.check(result, q.format)
    return result, info


def _write_trtllm_options(plan: BuildPlan, tmp: Path, final: Path) -> None:
    from dflash_trt.engines.trtllm_options import llm_api_options, write_llm_api_options

    c = plan.config
    options = llm_api_options(
        target_dir=c.target, drafter_dir=final / "drafter", max_batch_size=c.max_batch_size, max_seq_len=c.max_seq_len,
        verify_len=plan.verify_len, cuda_graph_batch_sizes=c.cuda_graph_batch_sizes,
        kv_cache_free_gpu_memory_fraction=c.kv_cache_free_gpu_memory_fraction,
        tensor_parallel_size=c.tensor_parallel_size, dtype=plan.dtype, mask_token_id=plan.drafter.mask_token_id,
        target_layer_ids=plan.drafter.target_layer_ids)
    write_llm_api_options(tmp / TRTLLM_OPTIONS, options)


def _write_triton_repository(plan: BuildPlan, tmp: Path, draft_prior: list[float] | None) -> None:
    from dflash_trt.serve.triton.repository import write_model_repository

    c = plan.config
    write_model_repository(tmp / TRITON_REPOSITORY, target=c.target, drafter=tmp / "drafter",
                           max_batch_size=c.max_batch_size, max_seq_len=c.max_seq_len, device=c.device,
                           dtype=plan.dtype, verify_len=plan.verify_len, instance_count=c.triton.instance_count,
                           draft=c.draft if c.draft is not None and not c.draft.startswith("chain") else None,
                           default_max_tokens=c.triton.default_max_tokens, engine_dir=tmp, draft_prior=draft_prior)


def build(plan: BuildPlan, *, progress: bool = True) -> dict:
    """Write the engine directory `plan.output`; returns its manifest."""
    import yaml

    c = plan.config
    _log(describe(plan))
    with ckpt.atomic_directory(plan.output) as tmp:
        drafter_out = tmp / "drafter"
        acceptance = quant_info = None
        if plan.quantization == "none":
            drafter_out.mkdir()
            for f in checkpoint_files(c.drafter):
                shutil.copy2(f, drafter_out / f.name)
        else:
            acceptance, quant_info = _quantize_with_gate(plan, drafter_out, progress)
        if c.backend == "trtllm":
            _write_trtllm_options(plan, tmp, plan.output.resolve())
        else:
            _write_triton_repository(plan, tmp, acceptance["curve"] if acceptance else None)
        (tmp / BUILD_CONFIG_NAME).write_text(
            "# The resolved build config of this engine directory (dflash-trt build, after --set overrides).\n"
            + yaml.safe_dump(c.to_yaml_dict(), sort_keys=False))
        manifest = make_manifest(plan, tmp, acceptance=acceptance, quantization=quant_info)
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    _log(f"wrote {plan.output}")
    return manifest
