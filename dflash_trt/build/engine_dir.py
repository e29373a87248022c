"""Writing the engine directory's manifest (docs/engine-dir.md) and opening an engine directory for generation.

The manifest is read everywhere through dflash_trt.manifest.load_manifest; this module makes it (make_manifest) and
turns an engine directory back into a running engine (open_engine: the torch engine or TensorRT-LLM's).
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
from pathlib import Path
from typing import Any

from dflash_trt.errors import ConfigError
from dflash_trt.manifest import (MANIFEST_FORMAT, MANIFEST_NAME, MANIFEST_VERSION, draft_prior, load_manifest,
                                 manifest_path, sha256, verify_files)

BUILD_CONFIG_NAME = "build_config.yaml"
TRITON_REPOSITORY = "triton/model_repository"
TRTLLM_OPTIONS = "trtllm/llm_api_options.yaml"


def _files(directory: Path) -> list[Path]:
    """Every file under `directory` but the manifest, sorted."""
    return [p for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name != MANIFEST_NAME and "__pycache__" not in p.parts]


def checksums(directory: Path) -> dict[str, str]:
    """sha256 of every file under `directory` (but the manifest), keyed by POSIX path relative to it."""
    return {p.relative_to(directory).as_posix(): sha256(p) for p in _files(directory)}


def file_sizes(directory: Path) -> dict[str, int]:
    """Size in bytes of the same files: what loading checks before it reads any weights."""
    return {p.relative_to(directory).as_posix(): p.stat().st_size for p in _files(directory)}


def versions() -> dict[str, str | None]:
    """Versions of what built the engine (distributions are looked up, never imported)."""
    from dflash_trt import __version__

    def dist(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {"dflash_trt": __version__, "python": platform.python_version(), "torch": dist("torch"),
            "transformers": dist("transformers"), "safetensors": dist("safetensors"),
            "nvidia_modelopt": dist("nvidia-modelopt"), "tensorrt_llm": dist("tensorrt_llm")}


def make_manifest(plan, engine_dir: Path, *, acceptance: dict | None, quantization: dict | None) -> dict[str, Any]:
    """manifest.json for the engine directory `engine_dir` (already holding everything else) built from `plan`."""
    from dflash_trt import checkpoint as ckpt

    c, d, t = plan.config, plan.drafter, plan.target
    trtllm = c.backend == "trtllm"
    target_config = Path(c.target) / ckpt.CONFIG_NAME
    drafter_quant = quantization["quant_algo"].lower() if quantization else d.quantization
    built_with = versions()
    return {
        "format": MANIFEST_FORMAT,
        "format_version": MANIFEST_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "dflash_trt_version": built_with["dflash_trt"],
        "versions": built_with,
        "backend": c.backend,
        "target": {"path": str(Path(c.target).resolve()),
                   "model_type": t.model_type if isinstance(t, ckpt.TargetSummary) else t.hf_config.model_type,
                   "num_hidden_layers": t.num_hidden_layers, "hidden_size": t.hidden_size, "vocab_size": t.vocab_size,
                   "config_sha256": sha256(target_config) if target_config.is_file() else None},
        "drafter": {"path": "drafter", "source": str(Path(c.drafter).resolve()), "quantization": drafter_quant,
                    "num_hidden_layers": d.num_hidden_layers, "block_size": d.block_size,
                    "mask_token_id": d.mask_token_id, "target_layer_ids": list(d.target_layer_ids),
                    **({"modelopt": quantization} if quantization else {})},
        "runtime": {"device": "cuda" if trtllm else c.device, "dtype": plan.dtype, "max_batch_size": c.max_batch_size,
                    "max_seq_len": c.max_seq_len, "verify_len": plan.verify_len,
                    **({"draft": c.draft} if c.draft is not None else {}),
                    "cuda_graph_batch_sizes": list(c.cuda_graph_batch_sizes),
                    "kv_cache_free_gpu_memory_fraction": c.kv_cache_free_gpu_memory_fraction,
                    "tensor_parallel_size": c.tensor_parallel_size},
        "requirements": {
            "gpu": trtllm or c.device.startswith("cuda"),
            "num_gpus": c.tensor_parallel_size if trtllm else (1 if c.device.startswith("cuda") else 0),
            "min_compute_capability": list(plan.min_compute_capability) if plan.min_compute_capability else None,
            "python_packages": ["tensorrt_llm"] if trtllm else [],
        },
        "acceptance": acceptance,
        "triton": {"model_repository": TRITON_REPOSITORY, "model_name": "dflash"} if not trtllm else None,
        "trtllm": {"llm_api_options": TRTLLM_OPTIONS} if trtllm else None,
        "build": {"host": platform.node(), "device": plan.build_device, "config": BUILD_CONFIG_NAME},
        "checksums": checksums(engine_dir),
        "file_sizes": file_sizes(engine_dir),
    }


def open_engine(engine_dir: str | os.PathLike, *, device: str | None = None, dtype: str | None = None,
                max_batch_size: int | None = None, use_drafter: bool = True, decode_loop: str = "auto",
                steps_per_sync: int = 4, compile: bool = False):
    """(engine, manifest) for an engine directory: a TorchEngine (backend torch) or a TrtllmEngine (backend trtllm),
    with the runtime settings the build recorded unless overridden here."""
    manifest = load_manifest(engine_dir)
    verify_files(manifest, engine_dir)
    backend = manifest.get("backend")
    runtime = manifest.get("runtime") or {}
    if backend == "trtllm":
        if compile:
            raise ConfigError("--compile is for the torch engine; a trtllm engine's runtime compiles through "
                              "TensorRT-LLM's own torch_compile_config: omit --compile")
        if device not in (None, "auto", "cuda") or dtype not in (None, "auto", runtime.get("dtype")):
            raise ConfigError("--device/--dtype cannot change a trtllm engine (TensorRT-LLM fixes them when it loads): "
                              "omit them or rebuild the engine directory")
        from dflash_trt.engines.trtllm_engine import TrtllmEngine

        return TrtllmEngine.from_engine_dir(engine_dir, use_drafter=use_drafter), manifest
    if backend != "torch":
        raise ConfigError(f"{Path(engine_dir) / MANIFEST_NAME}: backend {backend!r} is not 'torch' or 'trtllm'; "
                          "rebuild the engine directory")
    from dflash_trt.engines.torch_engine import TorchEngine

    target = manifest_path(manifest, engine_dir, "target")
    drafter = manifest_path(manifest, engine_dir, "drafter") if use_drafter else None
    run_device = device if device is not None else runtime.get("device", "auto")
    engine = TorchEngine.from_pretrained(
        target, drafter, device=None if run_device == "auto" else run_device, dtype=dtype or runtime.get("dtype"),
        max_batch_size=max_batch_size or int(runtime.get("max_batch_size", 8)),
        max_seq_len=runtime.get("max_seq_len"), decode_loop=decode_loop, steps_per_sync=steps_per_sync,
        compile=compile, draft_prior=draft_prior(manifest, engine_dir) if use_drafter else None)
    return engine, manifest
