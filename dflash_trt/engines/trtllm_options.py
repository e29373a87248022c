"""TensorRT-LLM LLM-API options for a DFlash engine directory: pure functions, no `tensorrt_llm` import.

The build step calls these to write `ENGINE_DIR/trtllm/llm_api_options.yaml`; `TrtllmEngine` reads the file back and
`trtllm-serve ENGINE_TARGET --config ENGINE_DIR/trtllm/llm_api_options.yaml` (alias `--extra_llm_api_options`) takes
it unchanged. Every key is a field of TensorRT-LLM's `TorchLlmArgs` (tensorrt_llm/llmapi/llm_args.py); the field names,
types and defaults this module relies on are recorded in tests/data/trtllm_api_fields.json (made by
scripts/extract_trtllm_fields.py) and tests/test_trtllm.py checks the generated options against them.

Facts used here (TensorRT-LLM source, file @ commit as read):
* llm_args.py @ 0004396720054fd8e205cbf616f21f0b57c6b412: `speculative_config` is a union discriminated by
  `decoding_type`; `DFlashDecodingConfig` has `decoding_type: Literal["DFlash"]`, `max_draft_len`,
  `speculative_model` (alias `speculative_model_dir`), `mask_token_id`, `target_layer_ids`, `attention_backend`
  (VANILLA | TRTLLM, the latter SM100/SM103 only); if mask_token_id / target_layer_ids are unset, TorchLlmArgs reads
  them from the drafter's `config.json` **only under `dflash_config`**, so they are written explicitly here.
  `kv_cache_config.free_gpu_memory_fraction` is a float in [0, 1]; `cuda_graph_config` is a `DecodeCudaGraphConfig`
  (`batch_sizes`, `enable_padding`, `max_batch_size`; a dict without `mode` is taken as decode); `stream_interval`
  (default 1) is how many iterations one streamed response covers.
* _torch/speculative/dflash.py @ 00679c66c3e38f6d2651ad0a5bef0f94d862e36c: the drafter block the worker computes must
  fit the checkpoint's trained `block_size`, and a step verifies K drafts + 1 bonus, so max_draft_len = K - 1 where
  K = our verified slots per step (runtime.verify_len <= drafter block_size).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from dflash_trt.errors import ConfigError
from dflash_trt.capabilities import FP8_MIN_CAPABILITY, NVFP4_MIN_CAPABILITY

LLM_API_OPTIONS_NAME = "llm_api_options.yaml"
TRTLLM_SOURCE_COMMIT = "0004396720054fd8e205cbf616f21f0b57c6b412"  # llm_args.py the field sheet was taken from

QUANTIZATIONS = ("none", "fp8", "nvfp4")
TRTLLM_DTYPES = ("auto", "bfloat16", "float16")
# The least compute capability backend trtllm can run each drafter quantization on.
#  none : TensorRT-LLM's PyTorch backend runs on Ampere and newer (its support matrix); DFlash's VANILLA drafter
#         attention is FlashAttention, also sm_80+.
#  fp8  : FP8 tensor cores exist from Ada (sm_89) and Hopper (sm_90) on.
#  nvfp4: FP4 tensor cores exist from Blackwell (sm_100) on; TensorRT-LLM's NVFP4 GEMMs need them.
MIN_COMPUTE_CAPABILITY = {"none": (8, 0), "fp8": FP8_MIN_CAPABILITY, "nvfp4": NVFP4_MIN_CAPABILITY}
_GPU_NAMES = {"none": "an Ampere or newer GPU (sm_80+)", "fp8": "an FP8 GPU (sm_89+: Ada, Hopper, Blackwell)",
              "nvfp4": "a Blackwell GPU (sm_100+: B200/GB200/B300, RTX 50xx)"}


def _int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _abs_dir(name: str, value: str | os.PathLike) -> str:
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise ConfigError(f"{name} must be a directory path, got {value!r}")
    return str(Path(value).expanduser().absolute())


def max_draft_len(verify_len: int) -> int:
    """TensorRT-LLM's `max_draft_len` for K verified slots per step (K - 1 drafts + 1 bonus token)."""
    return _int("runtime.verify_len", verify_len, 2) - 1


def llm_api_options(*, target_dir: str | os.PathLike, drafter_dir: str | os.PathLike | None, max_batch_size: int,
                    max_seq_len: int, verify_len: int, cuda_graph_batch_sizes: Sequence[int],
                    kv_cache_free_gpu_memory_fraction: float, tensor_parallel_size: int, dtype: str,
                    mask_token_id: int | None = None, target_layer_ids: Sequence[int] | None = None) -> dict[str, Any]:
    """The LLM API options (a plain dict, YAML-ready) for serving `target_dir` with the DFlash drafter in
    `drafter_dir` on TensorRT-LLM's PyTorch backend.

    target_dir / drafter_dir   checkpoint directories, written as absolute paths (`model`, `speculative_model`);
                               drafter_dir None gives the plain autoregressive options (no `speculative_config`)
    max_batch_size, max_seq_len, tensor_parallel_size   the LLM fields of the same names
    verify_len                 K, slots verified per step (2..drafter block_size); max_draft_len = K - 1
    cuda_graph_batch_sizes     decode batch sizes to capture CUDA graphs for (padding on); [] turns CUDA graphs off
    kv_cache_free_gpu_memory_fraction   kv_cache_config.free_gpu_memory_fraction, in (0, 1]
    dtype                      "auto" | "bfloat16" | "float16" (DFlash's drafter attention runs in 16-bit)
    mask_token_id, target_layer_ids   the drafter's, passed explicitly (TensorRT-LLM reads them from the drafter's
                               config.json only under `dflash_config`)
    """
    max_batch_size = _int("runtime.max_batch_size", max_batch_size, 1)
    max_seq_len = _int("runtime.max_seq_len", max_seq_len, 2)
    tensor_parallel_size = _int("runtime.tensor_parallel_size", tensor_parallel_size, 1)
    k = _int("runtime.verify_len", verify_len, 2)
    if dtype not in TRTLLM_DTYPES:
        hint = "; float32 is not served by backend trtllm" if dtype == "float32" else ""
        raise ConfigError(f"runtime.dtype {dtype!r} is not supported by backend trtllm{hint}: use one of {list(TRTLLM_DTYPES)}")
    frac = kv_cache_free_gpu_memory_fraction
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac <= 1:
        raise ConfigError(f"runtime.kv_cache_free_gpu_memory_fraction must be a number in (0, 1], got {frac!r}")
    if isinstance(cuda_graph_batch_sizes, (str, bytes)) or not isinstance(cuda_graph_batch_sizes, Sequence):
        raise ConfigError(f"runtime.cuda_graph_batch_sizes must be a list of batch sizes, got {cuda_graph_batch_sizes!r}")
    sizes = sorted({_int("runtime.cuda_graph_batch_sizes[]", s, 1) for s in cuda_graph_batch_sizes})
    if sizes and sizes[-1] > max_batch_size:
        raise ConfigError(f"runtime.cuda_graph_batch_sizes {sizes} has sizes above max_batch_size {max_batch_size}; "
                          f"drop them or raise max_batch_size")

    options: dict[str, Any] = {
        "model": _abs_dir("target.path", target_dir),
        "dtype": dtype,
        "tensor_parallel_size": tensor_parallel_size,
        "max_batch_size": max_batch_size,
        "max_seq_len": max_seq_len,
        # One forward takes K tokens per generating request; prompts longer than this need chunked prefill.
        "max_num_tokens": max(8192, max_batch_size * k),
        "kv_cache_config": {
            "free_gpu_memory_fraction": float(frac),
            # TensorRT-LLM's own DFlash tests and examples run with block reuse off; a reused prefix skips the
            # prefill that fills the drafter's context buffer.
            "enable_block_reuse": False,
        },
        "cuda_graph_config": {"batch_sizes": sizes, "enable_padding": True} if sizes else None,
        # One streamed response per iteration: TrtllmEngine reads the per-step acceptance length from it.
        "stream_interval": 1,
    }
    if drafter_dir is not None:
        spec: dict[str, Any] = {
            "decoding_type": "DFlash",
            "max_draft_len": k - 1,
            "speculative_model": _abs_dir("drafter.path", drafter_dir),
        }
        if mask_token_id is not None:
            spec["mask_token_id"] = _int("drafter.mask_token_id", mask_token_id, 0)
        if target_layer_ids is not None:
            if isinstance(target_layer_ids, (str, bytes)) or not list(target_layer_ids):
                raise ConfigError(f"drafter.target_layer_ids must be a non-empty list of ints, got {target_layer_ids!r}")
            spec["target_layer_ids"] = [_int("drafter.target_layer_ids[]", i, 0) for i in target_layer_ids]
        options["speculative_config"] = spec
    return options


def write_llm_api_options(path: str | os.PathLike, options: dict[str, Any]) -> Path:
    """Write `options` as YAML to `path` (atomically: temp file + rename) with a provenance header; returns the path."""
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ("# TensorRT-LLM LLM API options written by dflash-trt (fields of TorchLlmArgs, tensorrt_llm/llmapi/"
              "llm_args.py).\n# Serve with: trtllm-serve <model> --config this_file  (alias --extra_llm_api_options)\n")
    text = header + yaml.safe_dump(options, sort_keys=False, default_flow_style=False)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_llm_api_options(path: str | os.PathLike) -> dict[str, Any]:
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: missing; rebuild the engine directory with backend trtllm") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({str(err).splitlines()[0]}); rebuild the engine directory") from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), str):
        raise ConfigError(f"{path}: expected a mapping of LLM API options with a 'model' path; rebuild the engine directory")
    return data


def trtllm_min_compute_capability(quantization: str) -> tuple[int, int]:
    """The least GPU compute capability backend trtllm needs for a drafter quantized as `quantization`
    (what the engine-dir writer records as requirements.min_compute_capability)."""
    if quantization not in QUANTIZATIONS:
        raise ConfigError(f"drafter.quantization {quantization!r} is not supported; use one of {list(QUANTIZATIONS)}")
    return MIN_COMPUTE_CAPABILITY[quantization]


def check_trtllm_requirements(quantization: str, compute_capability: tuple[int, int] | None,
                              dtype: str | None = None) -> tuple[int, int]:
    """Fail fast (ConfigError naming the field and the fix) when backend trtllm cannot run `quantization` on a GPU of
    `compute_capability` (None = no GPU known: only the values are checked). Returns the least compute capability."""
    need = trtllm_min_compute_capability(quantization)
    if dtype is not None and dtype not in TRTLLM_DTYPES:
        raise ConfigError(f"runtime.dtype {dtype!r} is not supported by backend trtllm: use bfloat16 (or float16, auto)")
    if compute_capability is None:
        return need
    cc = tuple(int(x) for x in compute_capability)
    if len(cc) != 2:
        raise ConfigError(f"compute capability must be (major, minor), got {compute_capability!r}")
    if cc < need:
        have = f"sm_{cc[0]}{cc[1]}"
        if quantization == "none":
            raise ConfigError(f"backend trtllm needs {_GPU_NAMES['none']}; this GPU is {have}: use backend torch")
        fallback = "fp8 (sm_89+) or none" if quantization == "nvfp4" and cc >= MIN_COMPUTE_CAPABILITY["fp8"] else "none"
        raise ConfigError(f"drafter.quantization {quantization} on backend trtllm needs {_GPU_NAMES[quantization]}; "
                          f"this GPU is {have}: set drafter.quantization to {fallback}, or use backend torch")
    return need


def trtllm_exclude_modules(num_layers: int) -> list[str]:
    """ModelOpt `exclude_modules` for a quantized drafter served by TensorRT-LLM: the modules that must stay bf16,
    named as TensorRT-LLM names the draft model's modules, plus the same modules under our checkpoint's names.

    Why these (TensorRT-LLM _torch/models/modeling_dflash.py @ 009d8fa431bd3de92245aab80f8b57dc70da1ac4):
    * `fc`: `DFlashForCausalLM.load_weights` copies `fc.weight` into a plain `nn.Linear` of the tensor's own dtype
      (no quantized GEMM, weight scales dropped), and the drafter's context K/V buffers take `fc.weight.dtype`
      (dflash.py). A quantized fc would run unscaled fp8/packed-fp4 values.
    * q/k/v: `_build_fused_kv_buffers` slices the fused `qkv_proj.weight` rows for K and V of every layer and
      `precompute_context_kv` runs them with raw `F.linear`, ignoring any weight/input scales. TensorRT-LLM fuses
      q_proj, k_proj and v_proj into one `qkv_proj` with one quantization method, so q stays bf16 with k and v.
    * names: the draft backbone is built as the checkpoint's `model_type` class (Qwen3ForCausalLM) and its weights are
      remapped from `layers.N.*` to `model.layers.N.*`; `apply_quant_config_exclude_modules` (_torch/models/
      modeling_utils.py @ cb4c622cf5bb97009451f7f44609498a48a2b11d) matches `exclude_modules` with fnmatch against
      those names, trying `q_proj`/`k_proj`/`v_proj` in place of a fused `qkv_proj`. ModelOpt's DFlash export lists
      the *base* model's modules (`"model*"`), which under this naming matches every draft layer, so every Linear
      would be built unquantized over quantized tensors. This list names exactly the bf16 modules instead; o_proj
      and the MLP (gate/up/down) stay quantized.
    * `lm_head`: the drafter has none of its own (TensorRT-LLM shares the target's); ModelOpt lists it by convention.
    The checkpoint-name entries (`layers.N.self_attn.q_proj`, ...) do not match any TensorRT-LLM module name, so they
    are inert there; they let readers that use our checkpoint names (dflash-trt's own loader) use the same list.
    """
    n = _int("drafter.num_hidden_layers", num_layers, 1)
    names = ["lm_head", "fc"]
    for i in range(n):
        names += [f"model.layers.{i}.self_attn.{p}" for p in ("qkv_proj", "q_proj", "k_proj", "v_proj")]
    for i in range(n):
        names += [f"layers.{i}.self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj")]
    return names


def bf16_checkpoint_modules(num_layers: int) -> list[str]:
    """The drafter modules (our checkpoint names: `fc`, `layers.N.self_attn.{q,k,v}_proj`) the quantizer must leave
    in bf16 for backend trtllm; see trtllm_exclude_modules for why."""
    n = _int("drafter.num_hidden_layers", num_layers, 1)
    return ["fc"] + [f"layers.{i}.self_attn.{p}" for i in range(n) for p in ("q_proj", "k_proj", "v_proj")]
