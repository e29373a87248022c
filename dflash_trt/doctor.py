"""`dflash-trt doctor`: what this machine (or container) can run, and whether an engine directory runs here.

    dflash-trt doctor [--engine-dir DIR] [--json] [--require WHAT ...]

Reports, without importing TensorRT-LLM or touching a GPU kernel:

* GPUs (from torch, and from NVML when libnvidia-ml is there: it also sees GPUs a CPU-only torch cannot use), their
  compute capability and memory; the driver version and the CUDA version it supports; the CUDA torch was built for;
* torch, TensorRT-LLM, TensorRT, ModelOpt, transformers and Triton (server binary + Python backend) — each found by
  its installed metadata / on disk, never imported ("not installed" when absent), and whether the installed
  TensorRT-LLM defines `DFlashDecodingConfig` (read from its source: importing tensorrt_llm needs a GPU driver);
* the CUDA plugin library (plugins/, $DFLASH_PLUGINS_LIB): whether it loads (ctypes, ABI check; no GPU needed), the
  code it was compiled for (its own `dflash_compiled_archs()`), the code its `.nv_fatbin` really holds — parsed
  from the ELF by `dflash_trt.kernels.cuda.embedded_code`, which needs no CUDA tools and so works in any image, and
  cross-checked with `cuobjdump --list-elf/--list-ptx` when a cuobjdump is found (PATH, $CUDA_HOME/bin,
  /usr/local/cuda/bin, or the `nvidia-cuda-cuobjdump` wheel) — and whether that code runs on each GPU;
* per GPU: FP8 (compute capability >= 8.9) and NVFP4 (>= 10.0);
* plainly, what will not work here and why.

With --engine-dir it reads DIR/manifest.json (docs/engine-dir.md) and checks `backend`, `runtime.device`,
`runtime.tensor_parallel_size`, `drafter.quantization`, `acceptance.curve` (backend torch), `requirements` (gpu,
num_gpus, min_compute_capability, python_packages) and that the target / drafter checkpoints it references exist here
(a container needs them mounted).

Exit status:
    0  nothing configured cannot run here (no --engine-dir, or the engine directory can run on this machine)
    1  the engine directory cannot run here (each reason is printed), or a --require is not met
    2  bad input: no manifest.json, unreadable / not JSON, wrong format or version, a field of the wrong type, files
       the manifest names inside the engine directory missing (a DFlashError: `dflash-trt doctor: error: ...`)

A torch-backend engine with runtime.device cpu (or auto) runs on CPU; fp8 / nvfp4 drafters on the torch backend are
dequantized to the runtime dtype when loaded, so they run on CPU too. The trtllm backend needs TensorRT-LLM with
DFlashDecodingConfig and a CUDA GPU (FP8 drafter: sm_89+, NVFP4: sm_100+).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from dflash_trt.errors import ConfigError
from dflash_trt.capabilities import FP8_MIN_CAPABILITY, NVFP4_MIN_CAPABILITY
from dflash_trt.manifest import draft_prior, load_manifest, resolve, verify_files

EXIT_OK = 0
EXIT_CANNOT_RUN = 1
EXIT_BAD_INPUT = 2  # raised as ConfigError; dflash_trt.cli.main prints it as one line and returns 2

FP8_MIN_CC, NVFP4_MIN_CC = FP8_MIN_CAPABILITY, NVFP4_MIN_CAPABILITY
REQUIREMENTS = ("trtllm-dflash", "triton-python", "plugins", "gpu")

# (what we call it, import name, distribution names to ask importlib.metadata for)
PACKAGES = (
    ("torch", "torch", ("torch",)),
    ("tensorrt_llm", "tensorrt_llm", ("tensorrt_llm", "tensorrt-llm")),
    ("tensorrt", "tensorrt", ("tensorrt", "tensorrt-cu13", "tensorrt-cu12")),
    ("modelopt", "modelopt", ("nvidia-modelopt", "nvidia_modelopt")),
    ("transformers", "transformers", ("transformers",)),
)


# ---- what the machine has -------------------------------------------------------------------------------------------

@dataclass
class GPU:
    index: int
    name: str
    capability: tuple[int, int]
    memory_gib: Optional[float] = None

    @property
    def sm(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"


@dataclass
class Machine:
    """What doctor found. `gpus` are the GPUs torch can use (the engines run through torch / TensorRT-LLM);
    `nvml_gpus` are the GPUs the driver sees (may be more: CUDA_VISIBLE_DEVICES, or a CPU-only torch)."""
    gpus: list[GPU] = field(default_factory=list)
    nvml_gpus: list[GPU] = field(default_factory=list)
    driver_version: Optional[str] = None
    driver_cuda: Optional[str] = None
    torch_cuda: Optional[str] = None
    torch_error: Optional[str] = None
    packages: dict[str, Optional[str]] = field(default_factory=dict)  # name -> version or None (not installed)
    trtllm_dflash: Optional[bool] = None  # None: unknown (not installed, or its source layout not recognised)
    trtllm_dflash_detail: str = ""
    triton: dict[str, Any] = field(default_factory=dict)
    plugins: dict[str, Any] = field(default_factory=dict)

    def has(self, package: str) -> bool:
        return self.packages.get(package) is not None


def _version(dists: tuple[str, ...]) -> Optional[str]:
    for d in dists:
        try:
            return importlib.metadata.version(d)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def probe_packages() -> dict[str, Optional[str]]:
    """name -> installed version, or None when the module cannot be found. Nothing is imported."""
    out: dict[str, Optional[str]] = {}
    for name, module, dists in PACKAGES:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        out[name] = (_version(dists) or "unknown version") if spec is not None else None
    return out


def defines_dflash_config(llm_args_source: str) -> bool:
    """Whether TensorRT-LLM's llm_args.py source defines DFlashDecodingConfig at module level."""
    return bool(re.search(r"^class\s+DFlashDecodingConfig\b", llm_args_source, re.M))


def trtllm_dflash_support() -> tuple[Optional[bool], str]:
    """Whether the installed TensorRT-LLM defines DFlashDecodingConfig, read from tensorrt_llm/llmapi/llm_args.py
    (TensorRT-LLM added it in PR #12794, first released in 1.3.0rc14; 1.3.0rc13 does not have it). Not imported:
    `import tensorrt_llm` loads CUDA libraries and fails on a machine without a driver."""
    try:
        spec = importlib.util.find_spec("tensorrt_llm")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None, "TensorRT-LLM not installed"
    for root in spec.submodule_search_locations:
        args = Path(root) / "llmapi" / "llm_args.py"
        if args.is_file():
            found = defines_dflash_config(args.read_text(errors="replace"))
            return found, f"{args}: {'defines' if found else 'does not define'} DFlashDecodingConfig"
    return None, "tensorrt_llm/llmapi/llm_args.py not found: cannot tell whether DFlashDecodingConfig exists"


def probe_triton() -> dict[str, Any]:
    """tritonserver as `serve` finds it: on PATH or at $TRITON_SERVER_ROOT (a Triton container), or the one the
    nvidia-pytriton wheel bundles."""
    from dflash_trt.serve.triton.server import locate_tritonserver

    return locate_tritonserver()


def _probe_torch(machine: Machine) -> None:
    try:
        import torch
    except Exception as err:  # noqa: BLE001 - report whatever stops torch from importing
        machine.torch_error = f"{type(err).__name__}: {err}"
        return
    machine.torch_cuda = torch.version.cuda
    try:
        available = torch.cuda.is_available()
    except Exception as err:  # noqa: BLE001
        machine.torch_error = f"torch.cuda.is_available() failed: {err}"
        return
    if not available:
        return
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        machine.gpus.append(GPU(i, props.name, (props.major, props.minor), round(props.total_memory / 2**30, 1)))


class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def _probe_nvml(machine: Machine) -> None:
    """Driver version, the CUDA version the driver supports, and every GPU the driver sees (libnvidia-ml, which the
    NVIDIA container toolkit mounts into containers run with --gpus)."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return
    try:
        if nvml.nvmlInit_v2() != 0:
            return
    except AttributeError:
        return
    try:
        buf = ctypes.create_string_buffer(96)
        if nvml.nvmlSystemGetDriverVersion(buf, 96) == 0:
            machine.driver_version = buf.value.decode()
        cuda = ctypes.c_int()
        if nvml.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(cuda)) == 0:
            machine.driver_cuda = f"{cuda.value // 1000}.{cuda.value % 1000 // 10}"
        count = ctypes.c_uint()
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return
        for i in range(count.value):
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0:
                continue
            name = ctypes.create_string_buffer(96)
            nvml.nvmlDeviceGetName(handle, name, 96)
            major, minor = ctypes.c_int(), ctypes.c_int()
            nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor))
            mem = _NvmlMemory()
            total = round(mem.total / 2**30, 1) if nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)) == 0 else None
            machine.nvml_gpus.append(GPU(i, name.value.decode(), (major.value, minor.value), total))
    finally:
        nvml.nvmlShutdown()


def find_cuobjdump() -> Optional[str]:
    """cuobjdump on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin, or from the nvidia-cuda-cuobjdump wheel."""
    cands = [shutil.which("cuobjdump"), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "cuobjdump"),
             "/usr/local/cuda/bin/cuobjdump"]
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations if spec is not None and spec.submodule_search_locations else []):
        cands += sorted(str(p) for p in Path(root).glob("cu*/bin/cuobjdump"))
        cands.append(str(Path(root) / "cuda_cuobjdump" / "bin" / "cuobjdump"))
    for cand in cands:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def cuobjdump_code(lib: str | os.PathLike, tool: str) -> list[str]:
    """'sm_XY' per cubin and 'compute_XY' per PTX that `cuobjdump --list-elf/--list-ptx` lists, sorted like
    kernels.cuda.embedded_code."""
    found = set()
    for flag, kind in (("--list-elf", "cubin"), ("--list-ptx", "ptx")):
        out = subprocess.run([tool, flag, str(lib)], capture_output=True, text=True, timeout=60)
        if out.returncode != 0 and "does not contain" not in out.stderr + out.stdout:
            raise RuntimeError(f"{tool} {flag} failed: {out.stderr.strip() or out.stdout.strip()}")
        for arch in re.findall(rf"\.sm_(\d+[a-z]?)\.{kind}\b", out.stdout):
            found.add(("compute_" if kind == "ptx" else "sm_") + arch)
    return sorted(found, key=lambda a: (a.startswith("compute"), int(re.sub(r"\D", "", a.split("_")[1]))))


def probe_plugins(gpus: list[GPU]) -> dict[str, Any]:
    try:
        from dflash_trt.kernels import cuda as kc
    except Exception as err:  # noqa: BLE001 - torch missing or broken
        return {"path": None, "loads": False, "error": f"dflash_trt.kernels.cuda cannot be imported: {err}"}
    path = kc.library_path()
    info: dict[str, Any] = {"path": str(path), "exists": path.is_file(), "loads": False, "error": None,
                            "compiled": None, "embedded": None, "cuobjdump": None, "cuobjdump_tool": None,
                            "runs_on": {}}
    if not path.is_file():
        info["error"] = f"{path} not found: build it with scripts/build_plugins.sh (or set ${kc.LIB_ENV})"
        return info
    try:
        lib = kc.load_library(path)
        info["loads"] = True
        info["compiled"] = kc.compiled_archs(lib)
    except kc.PluginError as err:
        info["error"] = str(err)
    try:
        info["embedded"] = kc.embedded_code(path)
    except (kc.PluginError, OSError, ValueError) as err:
        info["error"] = info["error"] or f"cannot read the fatbin: {err}"
    tool = find_cuobjdump()
    if tool is not None:
        info["cuobjdump_tool"] = tool
        try:
            info["cuobjdump"] = cuobjdump_code(path, tool)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as err:
            info["cuobjdump"] = f"error: {err}"
    code = info["embedded"] or info["compiled"] or []
    for gpu in gpus:
        info["runs_on"][str(gpu.index)] = kc.arch_runs_on(code, gpu.capability)
    return info


def probe(with_plugins: bool = True) -> Machine:
    machine = Machine(packages=probe_packages())
    _probe_torch(machine)
    _probe_nvml(machine)
    machine.trtllm_dflash, machine.trtllm_dflash_detail = trtllm_dflash_support()
    machine.triton = probe_triton()
    if with_plugins:
        machine.plugins = probe_plugins(machine.gpus)
    return machine


# ---- what that means --------------------------------------------------------------------------------------------------

def fp8_ok(cc: tuple[int, int]) -> bool:
    return tuple(cc) >= FP8_MIN_CC


def nvfp4_ok(cc: tuple[int, int]) -> bool:
    return tuple(cc) >= NVFP4_MIN_CC


def limitations(m: Machine) -> list[str]:
    """What will not work on this machine, and why, in plain words."""
    out = []
    if m.torch_error:
        out.append(f"torch does not import ({m.torch_error}): nothing in dflash-trt runs")
    if not m.gpus:
        if m.nvml_gpus:
            why = (f"torch {m.packages.get('torch')} is a CPU-only build" if m.torch_cuda is None
                   else "torch cannot use them (CUDA_VISIBLE_DEVICES, or a driver too old for torch's CUDA "
                        f"{m.torch_cuda})")
            out.append(f"the driver sees {len(m.nvml_gpus)} GPU(s) but {why}: everything runs as if there were no GPU")
        out.append("no GPU: the trtllm backend cannot run (TensorRT-LLM needs a CUDA GPU); engines that require a GPU "
                   "(manifest requirements.gpu) cannot run; FP8 and NVFP4 need a GPU (sm_89+ / sm_100+); the CUDA "
                   "plugins cannot run. The torch backend runs on CPU (runtime.device cpu or auto; fp8/nvfp4 drafters "
                   "are dequantized when loaded) — correct, but slow")
    else:
        for g in m.gpus:
            if not fp8_ok(g.capability):
                out.append(f"GPU {g.index} ({g.name}, {g.sm}): no FP8 (needs sm_89+) and no NVFP4 (needs sm_100+) "
                           f"on the trtllm backend")
            elif not nvfp4_ok(g.capability):
                out.append(f"GPU {g.index} ({g.name}, {g.sm}): no NVFP4 (needs sm_100+; FP8 works)")
    if not m.has("tensorrt_llm"):
        out.append("TensorRT-LLM is not installed: backend trtllm cannot build or run (use the Docker image, "
                   "docs/deploy-b300.md); backend torch is unaffected")
    elif m.trtllm_dflash is False:
        out.append(f"TensorRT-LLM {m.packages['tensorrt_llm']} has no DFlashDecodingConfig (first in 1.3.0rc14, "
                   "PR #12794): backend trtllm cannot run DFlash; use a newer TensorRT-LLM")
    if not m.has("modelopt"):
        out.append("ModelOpt (nvidia-modelopt) is not installed: `dflash-trt build` cannot quantize drafters to "
                   "fp8/nvfp4 (quantization: none still works)")
    if not m.triton.get("server"):
        out.append("no tritonserver binary: `dflash-trt serve` through Triton is not available here")
    elif not m.triton.get("python_backend"):
        out.append(f"tritonserver found ({m.triton.get('server')}) but no Python backend for it: the dflash model "
                   "(1/model.py) cannot load")
    p = m.plugins
    if p:
        if not p.get("loads"):
            out.append(f"CUDA plugin library unusable: {p.get('error')} (the torch references are used instead)")
        else:
            for idx, ok in p.get("runs_on", {}).items():
                if not ok:
                    g = next(g for g in m.gpus if str(g.index) == idx)
                    out.append(f"CUDA plugins hold no code for GPU {idx} ({g.name}, {g.sm}): rebuild with "
                               f"DFLASH_CUDA_ARCHS=\"{g.capability[0]}{g.capability[1]}\" scripts/build_plugins.sh")
            emb, cob = p.get("embedded"), p.get("cuobjdump")
            if isinstance(emb, list) and isinstance(cob, list) and emb != cob:
                out.append(f"the plugin fatbin parser ({emb}) and cuobjdump ({cob}) disagree: trust cuobjdump and "
                           "report this")
            if p.get("compiled") and emb and p["compiled"] != emb:
                out.append(f"the plugin library says it was built for {p['compiled']} but holds {emb}: rebuild it")
    return out


# ---- the engine directory ---------------------------------------------------------------------------------------------

def _get(d: dict, dotted: str, types, default=None, required=False):
    cur: Any = d
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            if required:
                raise ConfigError(f"manifest.json: missing field '{dotted}' (see docs/engine-dir.md)")
            return default
        cur = cur[part]
    if cur is None and not required:
        return default
    if not isinstance(cur, types) or (isinstance(cur, bool) and bool not in (types if isinstance(types, tuple) else (types,))):
        raise ConfigError(f"manifest.json: field '{dotted}' is {cur!r}, expected {_typename(types)} "
                          "(see docs/engine-dir.md)")
    return cur


def _typename(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join({bool: "true/false", int: "an integer", str: "a string", list: "a list", dict: "an object"}
                       .get(t, t.__name__) for t in types)


@dataclass
class EngineCheck:
    engine_dir: str
    backend: str
    device: str
    quantization: str
    problems: list[str] = field(default_factory=list)  # each one alone means: cannot run here
    notes: list[str] = field(default_factory=list)

    @property
    def runs_here(self) -> bool:
        return not self.problems


def check_engine(engine_dir: str | os.PathLike, machine: Machine, manifest: Optional[dict] = None) -> EngineCheck:
    """Whether the engine directory can run on `machine`. Bad manifests raise ConfigError; reasons it cannot run
    here are listed in .problems."""
    d = Path(engine_dir)
    m = manifest if manifest is not None else load_manifest(d)
    backend = _get(m, "backend", str, required=True)
    if backend not in ("torch", "trtllm"):
        raise ConfigError(f"manifest.json: backend {backend!r} is not 'torch' or 'trtllm'")
    device = _get(m, "runtime.device", str, default="auto")
    if device not in ("cpu", "auto") and not re.fullmatch(r"cuda(:\d+)?", device):
        raise ConfigError(f"manifest.json: runtime.device {device!r} is not cpu, cuda[:N] or auto")
    quant = _get(m, "drafter.quantization", str, default="none")
    if quant not in ("none", "fp8", "nvfp4"):
        raise ConfigError(f"manifest.json: drafter.quantization {quant!r} is not none, fp8 or nvfp4")
    tp = _get(m, "runtime.tensor_parallel_size", int, default=1)
    need_gpu = _get(m, "requirements.gpu", bool, default=False)
    num_gpus = _get(m, "requirements.num_gpus", int, default=0)
    min_cc = _get(m, "requirements.min_compute_capability", list, default=None)
    if min_cc is not None and (len(min_cc) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in min_cc)):
        raise ConfigError(f"manifest.json: requirements.min_compute_capability {min_cc!r} is not [major, minor]")
    packages = _get(m, "requirements.python_packages", list, default=[])
    if not all(isinstance(p, str) for p in packages):
        raise ConfigError(f"manifest.json: requirements.python_packages {packages!r} is not a list of names")
    target = _get(m, "target.path", str, required=True)
    drafter = _get(m, "drafter.path", str, required=True)
    if backend == "torch":
        draft_prior(m, d)  # the build's acceptance curve, auto's prior: one probability per draft position

    chk = EngineCheck(str(d), backend, device, quant)
    gpus = machine.gpus
    gpu_word = "no GPU here" if not gpus else f"{len(gpus)} GPU(s) here"

    # The engine directory's own files: missing ones mean the directory is incomplete (bad input, exit 2).
    drafter_dir = resolve(d, drafter)
    if not drafter.startswith("/") and not drafter_dir.is_dir():
        raise ConfigError(f"{drafter_dir}: the drafter directory named by manifest.json drafter.path is missing: "
                          "the engine directory is incomplete; rebuild it")
    if backend == "trtllm":
        opts = _get(m, "trtllm.llm_api_options", str, required=True)
        if not resolve(d, opts).is_file():
            raise ConfigError(f"{resolve(d, opts)}: named by manifest.json trtllm.llm_api_options but missing: "
                              "the engine directory is incomplete; rebuild it")
    verify_files(m, d, checksums=True)  # every file there, with its size and sha256

    # Files outside the engine directory (the target is referenced, not copied): must be mounted here.
    tpath = resolve(d, target)
    if not tpath.is_dir():
        chk.problems.append(f"target checkpoint {tpath} (manifest target.path) does not exist here: mount it at the "
                            "same path (docker run -v HOST_DIR:" + str(tpath) + ":ro) or rebuild")
    elif not (tpath / "config.json").is_file():
        chk.problems.append(f"target checkpoint {tpath} has no config.json: not a Hugging Face checkpoint")
    if drafter.startswith("/") and not drafter_dir.is_dir():
        chk.problems.append(f"drafter {drafter_dir} (manifest drafter.path) does not exist here: mount it")

    # GPUs.
    wants_gpu = need_gpu or num_gpus > 0 or backend == "trtllm" or device.startswith("cuda")
    if wants_gpu and not gpus:
        why = ("backend trtllm needs a CUDA GPU" if backend == "trtllm" else
               f"runtime.device is {device}" if device.startswith("cuda") else "requirements.gpu is true")
        chk.problems.append(f"needs a CUDA GPU ({why}) and there is {gpu_word}")
    want_n = max(num_gpus, tp if backend == "trtllm" else 1 if wants_gpu else 0)
    if gpus and want_n > len(gpus):
        chk.problems.append(f"needs {want_n} GPUs (requirements.num_gpus={num_gpus}, tensor_parallel_size={tp}) and "
                            f"there are {len(gpus)} here")
    if device.startswith("cuda:") and gpus and int(device.split(":")[1]) >= len(gpus):
        chk.problems.append(f"runtime.device is {device} but there are only {len(gpus)} GPU(s) (0..{len(gpus) - 1})")
    used = gpus[:max(want_n, 1)] if wants_gpu or (device == "auto" and gpus) else []
    if min_cc is not None and used:
        low = [g for g in used if g.capability < tuple(min_cc)]
        if low:
            chk.problems.append(f"needs compute capability >= {min_cc[0]}.{min_cc[1]} "
                                f"(requirements.min_compute_capability) but " +
                                ", ".join(f"GPU {g.index} ({g.name}) is {g.capability[0]}.{g.capability[1]}" for g in low))
    if backend == "trtllm" and used:
        floor, what = {"fp8": (FP8_MIN_CC, "FP8 (sm_89+)"), "nvfp4": (NVFP4_MIN_CC, "NVFP4 (sm_100+)")}.get(quant, (None, ""))
        low = [g for g in used if floor is not None and g.capability < floor]
        if low:
            chk.problems.append(f"the drafter is {quant}; TensorRT-LLM runs {what} only, and " +
                                ", ".join(f"GPU {g.index} ({g.name}) is {g.sm}" for g in low))

    # Software.
    for pkg in packages:
        key = pkg.replace("-", "_")
        known = machine.packages.get(key) if key in machine.packages else _installed(pkg)
        if known is None:
            chk.problems.append(f"needs the Python package {pkg!r} (requirements.python_packages), not installed here")
    if backend == "trtllm":
        if not machine.has("tensorrt_llm") and "tensorrt_llm" not in [p.replace("-", "_") for p in packages]:
            chk.problems.append("backend trtllm needs TensorRT-LLM, not installed here")
        elif machine.trtllm_dflash is False:
            chk.problems.append(f"backend trtllm needs DFlashDecodingConfig; TensorRT-LLM "
                                f"{machine.packages.get('tensorrt_llm')} has none ({machine.trtllm_dflash_detail})")

    # What it means when it does run.
    if backend == "torch":
        on = ("CPU" if device == "cpu" or not gpus else f"GPU {device if device.startswith('cuda') else 'cuda:0'}")
        chk.notes.append(f"torch backend on {on}" + (" (runtime.device auto, no GPU here)" if device == "auto" and not gpus else ""))
        fp8_gemm = quant == "fp8" and used and all(g.capability >= FP8_MIN_CC for g in used)
        if fp8_gemm:
            chk.notes.append("fp8 drafter on the torch backend: FP8 GEMMs (torch._scaled_mm) on this sm_89+ GPU")
        elif quant != "none":
            chk.notes.append(f"{quant} drafter on the torch backend: dequantized to the runtime dtype when loaded "
                             "(runs anywhere, no {quant} speed-up)".replace("{quant}", quant))
    tri = _get(m, "triton.model_repository", str, default=None)
    if tri and not resolve(d, tri).is_dir():
        chk.notes.append(f"no Triton model repository at {resolve(d, tri)}: `dflash-trt serve` through Triton "
                         "will not find the model")
    return chk


def _installed(pkg: str) -> Optional[str]:
    try:
        if importlib.util.find_spec(pkg.replace("-", "_")) is None:
            return None
    except (ImportError, ValueError):
        return None
    return _version((pkg,)) or "unknown version"


# ---- requirements for images (--require) ------------------------------------------------------------------------------

def check_requirement(what: str, m: Machine) -> Optional[str]:
    """None if `what` is met, else why not."""
    if what == "trtllm-dflash":
        if not m.has("tensorrt_llm"):
            return "TensorRT-LLM is not installed"
        if m.trtllm_dflash is not True:
            return f"TensorRT-LLM {m.packages['tensorrt_llm']}: no DFlashDecodingConfig ({m.trtllm_dflash_detail})"
        return None
    if what == "triton-python":
        if not m.triton.get("server"):
            return "no tritonserver binary (PATH, $TRITON_SERVER_ROOT/bin or the nvidia-pytriton wheel)"
        if not m.triton.get("python_backend"):
            return f"no Triton Python backend for {m.triton.get('server')}"
        return None
    if what == "plugins":
        p = m.plugins
        if not p.get("loads"):
            return f"CUDA plugin library: {p.get('error')}"
        if p.get("compiled") != p.get("embedded"):
            return f"CUDA plugin library built for {p.get('compiled')} but holds {p.get('embedded')}"
        return None
    if what == "gpu":
        return None if m.gpus else "no CUDA GPU usable by torch"
    raise ConfigError(f"--require {what!r}: expected one of {', '.join(REQUIREMENTS)}")


# ---- report -----------------------------------------------------------------------------------------------------------

def _gpu_line(g: GPU) -> str:
    mem = f", {g.memory_gib} GiB" if g.memory_gib is not None else ""
    return (f"GPU {g.index}: {g.name}, compute capability {g.capability[0]}.{g.capability[1]} ({g.sm}){mem}; "
            f"FP8 {'yes' if fp8_ok(g.capability) else 'no'}, NVFP4 {'yes' if nvfp4_ok(g.capability) else 'no'}")


def render(m: Machine, limits: list[str], engine: Optional[EngineCheck], unmet: dict[str, str]) -> str:
    lines = ["dflash-trt doctor", ""]
    if m.gpus:
        lines += [f"  {_gpu_line(g)}" for g in m.gpus]
    else:
        lines.append("  GPUs: none usable (no GPU: torch.cuda.is_available() is False) — CPU only")
    extra = [g for g in m.nvml_gpus if not any(g.name == h.name and g.index == h.index for h in m.gpus)]
    lines += [f"  seen by the driver only: {_gpu_line(g)}" for g in extra]
    lines.append(f"  driver: {m.driver_version or 'not found (no libnvidia-ml)'}"
                 + (f", supports CUDA {m.driver_cuda}" if m.driver_cuda else ""))
    lines.append(f"  torch: {m.packages.get('torch') or 'not installed'}"
                 + (f" (CUDA {m.torch_cuda})" if m.torch_cuda else " (CPU-only build)" if m.has("torch") else ""))
    trt = m.packages.get("tensorrt_llm")
    lines.append(f"  TensorRT-LLM: {trt or 'not installed'}"
                 + ("" if not trt else f" (DFlashDecodingConfig: {'yes' if m.trtllm_dflash else 'no' if m.trtllm_dflash is False else 'unknown'})"))
    for key, label in (("tensorrt", "TensorRT"), ("modelopt", "ModelOpt"), ("transformers", "transformers")):
        lines.append(f"  {label}: {m.packages.get(key) or 'not installed'}")
    lines.append(f"  Triton: {m.triton.get('server') or 'not installed'}"
                 + (f" (Python backend: {'yes' if m.triton.get('python_backend') else 'no'})" if m.triton.get("server") else ""))
    p = m.plugins
    if p:
        if p.get("loads"):
            lines.append(f"  CUDA plugins: {p['path']} loads; built for {','.join(p['compiled'])}; fatbin holds "
                         f"{','.join(p['embedded'] or [])}"
                         + (f"; cuobjdump: {','.join(p['cuobjdump']) if isinstance(p['cuobjdump'], list) else p['cuobjdump']}"
                            if p.get("cuobjdump") is not None else "; cuobjdump: not found (fatbin parsed directly)"))
            for idx, ok in p.get("runs_on", {}).items():
                lines.append(f"    runs on GPU {idx}: {'yes' if ok else 'no'}")
        else:
            lines.append(f"  CUDA plugins: not usable — {p.get('error')}")
    lines += ["", "What will not work here:" if limits else "What will not work here: nothing found"]
    lines += [f"  - {x}" for x in limits]
    if engine is not None:
        lines += ["", f"Engine {engine.engine_dir} (backend {engine.backend}, runtime.device {engine.device}, "
                      f"drafter {engine.quantization}):"]
        if engine.runs_here:
            lines.append("  can run here")
        else:
            lines.append("  CANNOT run here:")
            lines += [f"  - {x}" for x in engine.problems]
        lines += [f"  note: {x}" for x in engine.notes]
    for what, why in unmet.items():
        lines.append(f"required {what}: NOT MET — {why}")
    return "\n".join(lines)


def run(args) -> int:
    machine = probe()
    engine = check_engine(args.engine_dir, machine) if args.engine_dir else None
    unmet = {}
    for what in args.require or []:
        why = check_requirement(what, machine)
        if why:
            unmet[what] = why
    limits = limitations(machine)
    code = EXIT_CANNOT_RUN if (engine is not None and not engine.runs_here) or unmet else EXIT_OK
    if args.json:
        report = {"exit_code": code, "gpus": [asdict(g) for g in machine.gpus],
                  "nvml_gpus": [asdict(g) for g in machine.nvml_gpus],
                  "driver": {"version": machine.driver_version, "cuda": machine.driver_cuda},
                  "torch_cuda": machine.torch_cuda, "packages": machine.packages,
                  "trtllm_dflash": machine.trtllm_dflash, "trtllm_dflash_detail": machine.trtllm_dflash_detail,
                  "triton": machine.triton, "plugins": machine.plugins,
                  "precision": {str(g.index): {"fp8": fp8_ok(g.capability), "nvfp4": nvfp4_ok(g.capability)}
                                for g in machine.gpus},
                  "limitations": limits, "engine": asdict(engine) if engine else None,
                  "engine_runs_here": engine.runs_here if engine else None, "unmet_requirements": unmet}
        print(json.dumps(report, indent=2, default=list))
    else:
        print(render(machine, limits, engine, unmet))
    return code


def add_doctor_parser(sub) -> None:
    p = sub.add_parser("doctor", help="what this machine can run (GPUs, driver, torch, TensorRT-LLM, plugins); "
                                      "whether an engine directory runs here",
                       description="Report the GPUs (compute capability, FP8/NVFP4), driver, torch, TensorRT-LLM "
                                   "(and whether it has DFlashDecodingConfig), ModelOpt, Triton and the CUDA plugin "
                                   "library this machine has, what will not work here and why, and with --engine-dir "
                                   "whether that engine directory can run here.",
                       epilog="exit status: 0 ok; 1 the engine directory cannot run here (or a --require is not "
                              "met); 2 bad input (missing or corrupt manifest.json)")
    p.add_argument("--engine-dir", help="an engine directory (manifest.json) to check against this machine")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--require", action="append", choices=REQUIREMENTS,
                   help="exit 1 unless this is present (image checks): trtllm-dflash, triton-python, plugins, gpu")
    p.set_defaults(func=run)

