"""Build configs (`build_configs/*.yaml`): one pydantic model, every field documented, unknown keys refused.

    target: DIR                      # the target checkpoint (Hugging Face directory); referenced, never copied
    drafter: DIR                     # the DFlash drafter (z-lab format)
    output: DIR                      # the engine directory to write (default: out/engines/<config file stem>)
    backend: torch | trtllm          # which runtime serves the engine
    ...                              # see BuildConfig below and build_configs/README.md

Relative paths in a config file are relative to that file; relative paths given on the command line (`--set
target=...`, `--output`) are relative to the current directory. `--set key=value` overrides any field by its dotted
name (`--set quantization.format=nvfp4`, `--set cuda_graph_batch_sizes=[1,2]`); the value is read as YAML.

Every problem is one ConfigError naming the field and the fix (exit 2 from the CLI).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dflash_trt.errors import ConfigError, RequestError

# Fields that hold paths, by dotted name: resolved against the config file's directory (or the cwd for --set).
PATH_FIELDS = ("target", "drafter", "output", "quantization.calibration.prompts", "quantization.gate.prompts")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Calibration(_Strict):
    """Prompts whose *real* target context features calibrate the quantized drafter's activation ranges: the build
    runs the unquantized pair's speculative loop over them, so the drafter sees exactly what it sees when serving."""

    prompts: Path = Field(description="FastChat-style JSONL ({\"turns\": [...]} per line; the first turn is used)")
    num_samples: int = Field(16, ge=1, description="the first N prompts of the file are the calibration set")
    max_new_tokens: int = Field(64, ge=1, description="tokens generated per calibration prompt")


class Gate(_Strict):
    """The acceptance gate: mean τ of the quantized and the unquantized drafter on held-out prompts (greedy)."""

    prompts: Optional[Path] = Field(None, description="JSONL prompts (default: the calibration file, after the "
                                                      "calibration samples, so gate prompts are held out)")
    num_prompts: int = Field(16, ge=1, description="prompts measured")
    max_new_tokens: int = Field(128, ge=1, description="tokens generated per prompt")
    max_tau_drop: float = Field(0.02, ge=0.0, lt=1.0, description="largest allowed relative drop of mean τ, "
                                                                  "(tau_unquantized - tau_quantized) / tau_unquantized")


class Quantization(_Strict):
    """Drafter quantization with NVIDIA ModelOpt (the target and the shared embedding / LM head are never touched)."""

    format: Literal["none", "fp8", "nvfp4"] = Field("none", description="none | fp8 (sm_89+) | nvfp4 (sm_100+ on "
                                                                         "backend trtllm)")
    calibration: Optional[Calibration] = Field(None, description="required unless format is none")
    gate: Gate = Field(default_factory=Gate)
    keep_unquantized: Literal["auto", "none", "trtllm"] = Field(
        "auto", description="drafter linears left in the unquantized dtype: 'trtllm' keeps fc and q/k/v_proj (what "
                            "TensorRT-LLM's DFlash loader needs), 'none' quantizes every linear, 'auto' = 'trtllm' "
                            "for backend trtllm and 'none' for backend torch")


class Triton(_Strict):
    """The Triton model repository written into the engine directory (served by `dflash-trt serve --engine-dir`)."""

    instance_count: int = Field(1, ge=1, description="model instances (each loads its own engine)")
    default_max_tokens: int = Field(128, ge=1, description="max_tokens of requests that do not set it")


class BuildConfig(_Strict):
    """What `dflash-trt build` builds. Paths here are absolute once loaded (load_build_config resolves them)."""

    target: Path = Field(description="target checkpoint directory (Hugging Face format); referenced by the engine")
    drafter: Path = Field(description="DFlash drafter directory (z-lab format)")
    output: Optional[Path] = Field(None, description="engine directory to write (default out/engines/<config stem>)")
    backend: Literal["torch", "trtllm"] = Field("torch", description="torch (dflash-trt's engine: CPU or any CUDA GPU) "
                                                                     "| trtllm (TensorRT-LLM's PyTorch backend)")
    device: str = Field("auto", description="cpu | cuda | cuda:N | auto: where the build calibrates and measures, and "
                                            "where a torch-backend engine runs (auto = cuda when present)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="model dtype (auto = the target checkpoint's); backend trtllm needs a 16-bit dtype")
    quantization: Quantization = Field(default_factory=Quantization)
    verify_len: Optional[int] = Field(None, ge=2, description="K, block slots the target verifies per step (2..the "
                                                              "drafter's block_size; default all of them); TensorRT-LLM "
                                                              "max_draft_len = K-1. Formerly 'block_size' (deprecated)")
    draft: Optional[str] = Field(None, description="the torch engine's draft budget: 'chain:K' (the same as "
                                                   "verify_len K), 'tree:N' (a draft tree of N nodes) or 'auto' (K "
                                                   "chosen per window from measured acceptance and step cost); "
                                                   "default: verify_len")
    max_batch_size: int = Field(8, ge=1, description="requests decoded together")
    max_seq_len: int = Field(2048, ge=2, description="prompt + generated tokens per request")
    cuda_graph_batch_sizes: list[int] = Field(default_factory=lambda: [1, 2, 4, 8],
                                              description="decode batch sizes captured as CUDA graphs ([] = off)")
    kv_cache_free_gpu_memory_fraction: float = Field(0.9, gt=0.0, le=1.0,
                                                     description="backend trtllm: share of free GPU memory for KV cache")
    tensor_parallel_size: int = Field(1, ge=1, description="backend trtllm: GPUs the target is split over")
    triton: Triton = Field(default_factory=Triton)

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        if v in ("auto", "cpu", "cuda") or (v.startswith("cuda:") and v[5:].isdigit()):
            return v
        raise ValueError("must be cpu, cuda, cuda:N or auto")

    @field_validator("cuda_graph_batch_sizes")
    @classmethod
    def _graph_sizes(cls, v: list[int]) -> list[int]:
        if any(s < 1 for s in v):
            raise ValueError("batch sizes must be >= 1")
        return sorted(set(v))

    @model_validator(mode="after")
    def _consistent(self) -> "BuildConfig":
        q = self.quantization
        if q.format != "none" and q.calibration is None:
            raise ValueError(f"quantization.format {q.format} needs quantization.calibration.prompts (a JSONL prompt "
                             "file, e.g. data/prompts/eagle_gsm8k.jsonl); or set quantization.format: none")
        if self.backend == "torch" and self.tensor_parallel_size != 1:
            raise ValueError(f"tensor_parallel_size {self.tensor_parallel_size} needs backend trtllm (the torch engine "
                             "runs on one device): set backend: trtllm or tensor_parallel_size: 1")
        if self.backend == "trtllm" and self.dtype == "float32":
            raise ValueError("dtype float32 is not served by backend trtllm (its DFlash drafter attention is 16-bit): "
                             "set dtype: bfloat16")
        if self.cuda_graph_batch_sizes and self.cuda_graph_batch_sizes[-1] > self.max_batch_size:
            raise ValueError(f"cuda_graph_batch_sizes {self.cuda_graph_batch_sizes} has sizes above max_batch_size "
                             f"{self.max_batch_size}: drop them or raise max_batch_size")
        return self

    @property
    def keep_unquantized(self) -> str:
        mode = self.quantization.keep_unquantized
        return ("trtllm" if self.backend == "trtllm" else "none") if mode == "auto" else mode

    def to_yaml_dict(self) -> dict[str, Any]:
        """The resolved config as plain YAML-able data (paths as strings)."""
        return self.model_dump(mode="json")


# ---- loading -----------------------------------------------------------------------------------------------------------


def _get(data: dict, dotted: str):
    cur: Any = data
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _put(data: dict, dotted: str, value) -> None:
    parts = dotted.split(".")
    cur = data
    for i, part in enumerate(parts[:-1]):
        nxt = cur.get(part)
        if nxt is None:
            nxt = cur[part] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"--set {dotted}: '{'.'.join(parts[: i + 1])}' is not a section (it is {nxt!r})")
        cur = nxt
    cur[parts[-1]] = value


def _resolve_paths(data: dict, base: Path) -> None:
    for dotted in PATH_FIELDS:
        value = _get(data, dotted)
        if isinstance(value, (str, os.PathLike)) and str(value):
            p = Path(value).expanduser()
            _put(data, dotted, str(p if p.is_absolute() else (base / p).resolve()))


def parse_overrides(pairs: list[str]) -> list[tuple[str, Any]]:
    """`--set key=value` pairs -> [(dotted key, YAML-parsed value)]."""
    import yaml

    out = []
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"--set {pair!r}: expected key=value with a dotted key, e.g. --set quantization.format=fp8")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw  # not YAML: take the text as it is
        out.append((key, value))
    return out


def _format_validation_error(err: ValidationError, source: str) -> str:
    problems = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (remove it, or check the spelling against build_configs/README.md)"
        elif e["type"] == "missing":
            msg = "missing: this field is required"
        elif "input" in e and e["type"] not in ("value_error",):
            msg += f" (got {e['input']!r})"
        problems.append(f"field '{loc}': {msg}" if loc else msg)
    more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
    return f"build config {source}: " + "; ".join(problems[:3]) + more


def build_config_from_dict(data: dict, *, source: str = "<dict>") -> BuildConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"build config {source}: expected a YAML mapping of fields at top level, got {type(data).__name__}")
    if "block_size" in data:  # its old name: block_size is the drafter's B, never the verify length
        from dflash_trt.engines.requests import verify_len_from

        data = dict(data)
        try:
            data["verify_len"] = verify_len_from(data.get("verify_len"), data.pop("block_size"), "verify_len")
        except RequestError as err:
            raise ConfigError(f"build config {source}: {err}") from None
    try:
        return BuildConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def load_build_config(path: str | os.PathLike, overrides: list[str] | None = None,
                      output: str | os.PathLike | None = None) -> BuildConfig:
    """Read a YAML build config, apply `--set` overrides and `--output`, resolve paths, validate the values.

    Values only: whether the checkpoints exist and fit together is checked by `dflash_trt.build.plan`."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--config {str(path)!r} does not exist; pass a build config such as "
                          "build_configs/tiny-gsm8k-cpu.yaml")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"build config {path}: not valid YAML{where} ({getattr(err, 'problem', err)})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"build config {path}: not UTF-8 text") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"build config {path}: expected a mapping of fields at top level, got {type(data).__name__}")
    _resolve_paths(data, path.resolve().parent)
    cwd = Path.cwd()
    for key, value in parse_overrides(overrides or []):
        if key in PATH_FIELDS and isinstance(value, str) and value:
            p = Path(value).expanduser()
            value = str(p if p.is_absolute() else (cwd / p).resolve())
        _put(data, key, value)
    if output is not None:
        data["output"] = str((cwd / Path(output).expanduser()).resolve())
    if not data.get("output"):
        data["output"] = str((cwd / "out" / "engines" / path.stem).resolve())
    return build_config_from_dict(data, source=str(path))
