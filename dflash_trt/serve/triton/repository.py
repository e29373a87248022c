"""Triton model repository generator for the `dflash` Python-backend model."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from dflash_trt.capabilities import DECODE_LOOPS
from dflash_trt.errors import ConfigError
from dflash_trt.tempdirs import make_tempdir

MODEL_NAME = "dflash"
_TEMPLATE = Path(__file__).with_name("model.py")

# (name, data_type, dims, optional) -- names follow TensorRT-LLM's triton_backend/all_models/llmapi model.
_INPUTS = [
    ("text_input", "TYPE_STRING", "[ -1 ]", True),
    ("input_ids", "TYPE_INT32", "[ -1 ]", True),
    ("streaming", "TYPE_BOOL", "[ 1 ]", True),
    ("sampling_param_max_tokens", "TYPE_INT32", "[ 1 ]", True),
    ("sampling_param_temperature", "TYPE_FP32", "[ 1 ]", True),
    ("sampling_param_top_k", "TYPE_INT32", "[ 1 ]", True),
    ("sampling_param_top_p", "TYPE_FP32", "[ 1 ]", True),
    ("sampling_param_seed", "TYPE_UINT64", "[ 1 ]", True),
    ("sampling_param_stop", "TYPE_STRING", "[ -1 ]", True),
    ("sampling_param_stop_token_ids", "TYPE_INT32", "[ -1 ]", True),
    ("sampling_param_ignore_eos", "TYPE_BOOL", "[ 1 ]", True),
]
_OUTPUTS = [
    ("text_output", "TYPE_STRING", "[ -1 ]"),
    ("output_token_ids", "TYPE_INT32", "[ -1 ]"),
    ("finish_reason", "TYPE_STRING", "[ -1 ]"),
    ("total_accepted_draft_tokens", "TYPE_INT32", "[ 1 ]"),
    ("total_draft_tokens", "TYPE_INT32", "[ 1 ]"),
    ("acceptance_rate", "TYPE_FP32", "[ 1 ]"),
    ("mean_tau", "TYPE_FP32", "[ 1 ]"),
    ("batch_size", "TYPE_INT32", "[ 1 ]"),
    ("draft_steps", "TYPE_STRING", "[ 1 ]"),
]


def default_python_path() -> str:
    """The directory that holds the dflash_trt package, then this interpreter's site-packages (torch, transformers):
    what the backend stub, which does not inherit PYTHONPATH, needs on sys.path."""
    import site
    import sysconfig

    paths = [str(Path(__file__).resolve().parents[3])]
    paths += [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]
    return os.pathsep.join(dict.fromkeys(paths))


def _quote(value: str) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_config(*, target: str, drafter: str | None, max_batch_size: int, max_seq_len: int | None, device: str, dtype: str,
                  verify_len: int | None, python_path: str, instance_count: int = 1, model_name: str = MODEL_NAME,
                  draft: str | None = None,
                  speculative: bool = True, default_max_tokens: int = 128, torch_num_threads: int = 0,
                  decode_loop: str = "auto", steps_per_sync: int = 4, compile: bool = False,
                  draft_prior: Sequence[float] | None = None) -> str:
    """config.pbtxt text for the model (see write_model_repository for the arguments)."""
    # cuda: an instance group on every GPU (each instance loads on its own, see model.py); cuda:N: on GPU N only.
    kind = "KIND_GPU" if str(device).startswith("cuda") else "KIND_CPU"
    if str(device).startswith("cuda:") and str(device)[5:].isdigit():
        kind += f" gpus: [ {int(str(device)[5:])} ]"
    lines = [
        f"name: {_quote(model_name)}",
        'backend: "python"',
        "max_batch_size: 0  # batching happens inside the model (in-flight, at step boundaries), not in Triton",
        "model_transaction_policy { decoupled: true }  # streaming: any number of responses per request",
        f"instance_group [ {{ count: {instance_count} kind: {kind} }} ]",
        "input [",
        ",\n".join(f"  {{ name: {_quote(n)} data_type: {t} dims: {d}{' optional: true' if o else ''} }}"
                   for n, t, d, o in _INPUTS),
        "]",
        "output [",
        ",\n".join(f"  {{ name: {_quote(n)} data_type: {t} dims: {d} }}" for n, t, d in _OUTPUTS),
        "]",
    ]
    params = {
        "target": target, "drafter": drafter or "", "speculative": "true" if speculative else "false",
        "device": device, "dtype": dtype, "max_batch_size": max_batch_size, "max_seq_len": max_seq_len or 0,
        "verify_len": verify_len or 0, "default_max_tokens": default_max_tokens, "python_path": python_path,
        "torch_num_threads": torch_num_threads, "cancellation_check_period_ms": 20, "decode_loop": decode_loop,
        "steps_per_sync": steps_per_sync, "draft": draft or "", "compile": "true" if compile else "false",
        "draft_prior": ",".join(repr(float(p)) for p in draft_prior) if draft_prior is not None else "",
    }
    lines += [f"parameters {{ key: {_quote(k)} value: {{ string_value: {_quote(str(v))} }} }}" for k, v in params.items()]
    return "\n".join(lines) + "\n"


def write_model_repository(out_dir: str | os.PathLike, *, target: str | os.PathLike, drafter: str | os.PathLike | None,
                           max_batch_size: int = 8, max_seq_len: int | None = None, device: str = "cpu", dtype: str = "auto",
                           verify_len: int | None = None, python_path: str | None = None, instance_count: int = 1,
                           model_name: str = MODEL_NAME, speculative: bool = True, default_max_tokens: int = 128,
                           torch_num_threads: int = 0, engine_dir: str | os.PathLike | None = None,
                           decode_loop: str = "auto", steps_per_sync: int = 4, draft: str | None = None,
                           compile: bool = False, draft_prior: Sequence[float] | None = None) -> Path:
    """Write (or replace) the Triton model `model_name` in the repository directory `out_dir`; returns `out_dir`.

    Layout: ``out_dir/<model_name>/config.pbtxt`` and ``out_dir/<model_name>/1/model.py`` (the Python backend model
    in this package, copied). Other models already in `out_dir` are left alone, so one repository can hold e.g. a
    DFlash model and an AR model (``speculative=False``) side by side.

    target, drafter: checkpoint directories (stored as absolute paths; the drafter may be None when
        ``speculative=False``). max_batch_size: requests decoded together in one step (in-flight batching: more
        requests wait for a free slot). max_seq_len: prompt + generated tokens per request (None: the engine's
        default, 2048 or the target's max_position_embeddings if smaller). device: ``cpu``,
        ``cuda``, ``cuda:N`` or ``auto``. dtype: ``auto`` (the checkpoint's), ``float32``, ``bfloat16`` or
        ``float16``. verify_len: K, slots verified per step (None = the drafter's block_size). draft: the draft
        budget, "chain:K" or "auto" (None: verify_len; checked when the model loads). python_path: directories
        (os.pathsep-separated) the backend stub puts first on sys.path so it can import dflash_trt and torch (default:
        the directory holding this dflash_trt package). instance_count: model instances (each loads its own engine).
        default_max_tokens: used when a request has no ``sampling_param_max_tokens``. torch_num_threads: > 0 sets
        torch's intra-op threads in the model process. decode_loop / steps_per_sync: the engine's decode loop ("host":
        one host read per step; "device": windows of steps_per_sync steps, CUDA graphs on a GPU; "auto": device where
        those graphs run, else host). draft_prior: the drafter's acceptance per draft position (the build's measured
        curve, manifest acceptance.curve), the "auto" budget's prior (None: its default). engine_dir: the engine
        directory this repository lives in; target/drafter paths inside it are written relative to the model
        directory, so the engine directory can be moved (or written under a temporary name and renamed) without
        breaking them.

    `dflash-trt build` calls this with the values of the engine manifest (``runtime.*``) and writes the repository to
    ``ENGINE_DIR/triton/model_repository``; `dflash-trt serve` calls it for --target/--drafter. Raises ConfigError
    for values that cannot be served (the model itself re-validates the checkpoints when Triton loads it)."""
    if speculative and not drafter:
        raise ConfigError("write_model_repository: a drafter directory is required unless speculative=False")
    for name, value, low in (("max_batch_size", max_batch_size, 1), ("max_seq_len", max_seq_len, 2),
                             ("instance_count", instance_count, 1), ("steps_per_sync", steps_per_sync, 1)):
        if value is None and name == "max_seq_len":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"write_model_repository: {name} must be an integer >= {low}, got {value!r}")
    if verify_len is not None and (isinstance(verify_len, bool) or not isinstance(verify_len, int) or verify_len < 2):
        raise ConfigError(f"write_model_repository: verify_len must be None or an integer >= 2, got {verify_len!r}")
    if decode_loop not in DECODE_LOOPS:
        raise ConfigError(f"write_model_repository: decode_loop must be one of {', '.join(DECODE_LOOPS)}, "
                          f"got {decode_loop!r}")
    if not str(model_name) or any(c in str(model_name) for c in "/\\ \"'"):
        raise ConfigError(f"write_model_repository: model_name {model_name!r} must be a plain directory name")
    device = str(device)  # "auto" stays "auto": resolved where the model loads (cuda if that machine has one)
    for label, path in (("target", target), ("drafter", drafter)):
        if path is not None and not Path(path).is_dir():
            raise ConfigError(f"write_model_repository: {label} {str(path)!r} is not a directory")
    out = Path(out_dir)
    model_dir = out.resolve() / model_name

    def as_written(path) -> str:
        p = Path(path).resolve()
        if engine_dir is not None and Path(engine_dir).resolve() in p.parents:
            return os.path.relpath(p, model_dir)  # model.py resolves it against the model directory
        return str(p)

    config = render_config(
        target=as_written(target), drafter=as_written(drafter) if drafter else None,
        max_batch_size=max_batch_size, max_seq_len=max_seq_len, device=device, dtype=str(dtype), verify_len=verify_len,
        python_path=python_path if python_path is not None else default_python_path(), instance_count=instance_count,
        model_name=model_name, speculative=speculative, default_max_tokens=default_max_tokens, draft=draft,
        torch_num_threads=torch_num_threads, decode_loop=decode_loop, steps_per_sync=steps_per_sync, compile=compile,
        draft_prior=draft_prior)
    out.mkdir(parents=True, exist_ok=True)
    # Atomic per model: build beside it, then swap it in.
    tmp = make_tempdir(out.parent, f".{model_name}.")  # not in the repository: Triton would see it
    try:
        (tmp / "1").mkdir()
        shutil.copyfile(_TEMPLATE, tmp / "1" / "model.py")
        (tmp / "config.pbtxt").write_text(config)
        final = out / model_name
        if final.exists():
            old = make_tempdir(out.parent, f".{model_name}.")
            os.replace(final, old / model_name)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out
