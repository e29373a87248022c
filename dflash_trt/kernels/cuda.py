"""The CUDA kernels of the spec step (plugins/, libdflash_plugins.so) as torch ops.

Ops (torch.ops.dflash.*, made with torch.library.custom_op, with fake implementations for torch.compile / export):

    sample_accept(logits, drafts, temperature, top_k, top_p, keys, positions, stop_ids, remaining)
        -> (target_tokens, accepted, num_emitted, finished)      = kernels.sample_accept.sample_accept
    prepare_block(last_tokens, starts, mask_token_id, block_size) -> (ids, positions)  = block_draft.prepare_block
    drafts_to_verify(last_tokens, draft_logits, starts) -> (verify_ids, drafts, verify_positions)
        = block_draft.drafts_to_verify (drafts_to_verify_input plus the verify positions)
    commit_step(accepted, slots, starts, target_lengths, features, context, context_counts, drafter_lengths,
                target_tokens, last_tokens) -> None, in place     = kernels.bookkeeping.commit_step
    tree_accept(node_tokens, parents, depth, target_tokens, stop_ids, remaining, width)
        -> (path, target_tokens, accepted, num_emitted, finished)  = kernels.tree_accept.tree_accept
    compact_kv(k, v, slots, starts, path) -> None, in place       = kernels.tree_accept.compact_kv

On CUDA tensors an op calls the library through ctypes on the current stream (no synchronisation, no host reads of
device values); on CPU tensors it runs the torch reference. The library is found at $DFLASH_PLUGINS_LIB or
plugins/build/libdflash_plugins.so (scripts/build_plugins.sh builds it), loaded on first CUDA use, and checked: ABI
version, and that its cubins/PTX can run on the tensor's GPU. Problems raise a `PluginError` (a `DFlashError`)
that says what to do.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import threading
from pathlib import Path
from typing import NamedTuple, Optional

import torch

from dflash_trt.errors import DFlashError
from dflash_trt.kernels import block_draft as _block_ref
from dflash_trt.kernels import bookkeeping as _book_ref
from dflash_trt.kernels import sample_accept as _sa_ref
from dflash_trt.kernels import tree_accept as _tree_ref

ABI_VERSION = 2  # = DFLASH_ABI_VERSION in plugins/include/dflash_plugins.h
LIB_ENV = "DFLASH_PLUGINS_LIB"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LIB = REPO_ROOT / "plugins" / "build" / "libdflash_plugins.so"
BUILD_HINT = "run scripts/build_plugins.sh"

_DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_STATUS = {1: "invalid argument", 2: "CUDA error", 3: "no kernel image for this GPU"}


class PluginError(DFlashError):
    """The CUDA plugin library is missing, unusable on this GPU, or a kernel failed."""


class PluginNotFoundError(PluginError):
    """No libdflash_plugins.so where it was looked for."""


class PluginLoadError(PluginError):
    """The library exists but cannot be loaded or has the wrong ABI version."""


class PluginArchError(PluginError):
    """The library holds no code this GPU can run."""


class PluginLaunchError(PluginError):
    """A plugin entry point returned an error status."""


# ---- finding and loading the library --------------------------------------------------------------------------------

def library_path() -> Path:
    """$DFLASH_PLUGINS_LIB if set, else plugins/build/libdflash_plugins.so of this checkout."""
    env = os.environ.get(LIB_ENV)
    return Path(env) if env else DEFAULT_LIB


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


_lock = threading.Lock()
_libs: dict[str, ctypes.CDLL] = {}
_checked_devices: set[tuple[str, int]] = set()

_i64, _p, _sz = ctypes.c_int64, ctypes.c_void_p, ctypes.c_size_t
_SIGNATURES = {
    "dflash_abi_version": (ctypes.c_int, []),
    "dflash_compiled_archs": (ctypes.c_char_p, []),
    "dflash_last_error": (ctypes.c_char_p, []),
    "dflash_check_device": (ctypes.c_int, [ctypes.c_int]),
    "dflash_sample_accept_workspace_bytes": (_sz, [_i64, _i64, _i64]),
    "dflash_sample_accept": (ctypes.c_int, [_p, ctypes.c_int, _i64, _i64, _i64, _i64, _i64, _p, _p, _p, _p, _p, _p,
                                            _p, _i64, _p, _p, _p, _p, _p, _p, _sz, _p]),
    "dflash_prepare_block": (ctypes.c_int, [_p, _p, _i64, _i64, _i64, _p, _p, _p]),
    "dflash_drafts_to_verify_workspace_bytes": (_sz, [_i64, _i64, _i64]),
    "dflash_drafts_to_verify": (ctypes.c_int, [_p, _p, ctypes.c_int, _i64, _i64, _i64, _i64, _i64, _p, _p, _p, _p,
                                               _p, _sz, _p]),
    "dflash_commit_step": (ctypes.c_int, [_i64, _i64, _p, _p, _p, _i64, _p, _p, _i64, ctypes.c_int, _p, _i64, _p, _p,
                                          _p, _p, _p]),
    "dflash_tree_accept": (ctypes.c_int, [_i64, _i64, _p, _p, _p, _p, _p, _i64, _p, _i64, _p, _p, _p, _p, _p, _p]),
    "dflash_compact_kv": (ctypes.c_int, [_p, _p, ctypes.c_int, _i64, _i64, _i64, _i64, _i64, _i64, _p, _p, _p, _i64,
                                         _p]),
}


def load_library(path: str | os.PathLike | None = None) -> ctypes.CDLL:
    """Load (once per path) and ABI-check the plugin library. Needs no GPU: the library links cudart statically."""
    path = Path(path) if path is not None else library_path()
    key = str(path.resolve()) if path.exists() else str(path)
    with _lock:
        if key in _libs:
            return _libs[key]
        if not path.is_file():
            where = f"{_display(path)} (from ${LIB_ENV})" if os.environ.get(LIB_ENV) and path == library_path() else _display(path)
            raise PluginNotFoundError(f"{where} not found: {BUILD_HINT}")
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as err:
            raise PluginLoadError(f"{_display(path)} cannot be loaded ({err}): rebuild it with {BUILD_HINT}") from None
        missing = [name for name in _SIGNATURES if not hasattr(lib, name)]
        if missing:
            raise PluginLoadError(f"{_display(path)} lacks {', '.join(missing)}: it is not a dflash plugin library of "
                                  f"this version; {BUILD_HINT}")
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        version = lib.dflash_abi_version()
        if version != ABI_VERSION:
            raise PluginLoadError(f"{_display(path)} has ABI version {version}, this dflash_trt needs {ABI_VERSION}: "
                                  f"rebuild it with {BUILD_HINT}")
        _libs[key] = lib
        return lib


def compiled_archs(lib: ctypes.CDLL | None = None) -> list[str]:
    """The code the library embeds, as built: e.g. ['sm_90', 'sm_100', 'sm_103', 'compute_103']."""
    lib = lib or load_library()
    return [a for a in lib.dflash_compiled_archs().decode().split(",") if a]


def arch_runs_on(archs: list[str], capability: tuple[int, int]) -> bool:
    """Whether code built for `archs` runs on a GPU of compute capability (major, minor): a cubin sm_XY runs on
    X.Z for Z >= Y (same major; not the arch-specific 'a'/'f' variants); PTX compute_XY is JIT-compiled on any
    capability >= X.Y."""
    major, minor = capability
    cc = major * 10 + minor
    for a in archs:
        kind, _, num = a.partition("_")
        if not num.isdigit():
            continue
        v = int(num)
        if kind == "sm" and v // 10 == major and v % 10 <= minor:
            return True
        if kind == "compute" and v <= cc:
            return True
    return False


def check_device(device: torch.device | int | str | None = None, lib: ctypes.CDLL | None = None) -> None:
    """Raise PluginArchError unless the library's kernels can run on `device` (cached per device)."""
    lib = lib or load_library()
    if not torch.cuda.is_available():
        raise PluginError("no CUDA device: torch.cuda.is_available() is False (the CPU path runs the torch references)")
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if device.type != "cuda":
        raise PluginError(f"check_device needs a CUDA device, got {device}")
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (str(ctypes.cast(lib._handle, ctypes.c_void_p).value), index)
    if key in _checked_devices:
        return
    archs = compiled_archs(lib)
    major, minor = torch.cuda.get_device_capability(index)
    name = torch.cuda.get_device_name(index)
    built = ",".join(archs)
    if not arch_runs_on(archs, (major, minor)):
        raise PluginArchError(f"{_display(library_path())} was built for {built} but this GPU ({name}) is "
                              f"sm_{major}{minor}: rebuild for it with DFLASH_CUDA_ARCHS=\"{major}{minor}\" scripts/build_plugins.sh")
    status = lib.dflash_check_device(index)
    if status != 0:
        msg = lib.dflash_last_error().decode()
        cls = PluginArchError if status == 3 else PluginLoadError
        raise cls(f"{_display(library_path())} (built for {built}) cannot run on GPU {index} ({name}, "
                  f"sm_{major}{minor}): {msg}")
    _checked_devices.add(key)


def available(device: torch.device | int | str | None = None) -> bool:
    """True if CUDA is available and the library loads and runs on `device` (never raises)."""
    if not torch.cuda.is_available():
        return False
    try:
        check_device(device)
    except PluginError:
        return False
    return True


def embedded_code(path: str | os.PathLike | None = None) -> list[str]:
    """What the library's .nv_fatbin section really holds, read from the file (no CUDA tools needed): 'sm_XY' per
    cubin, 'compute_XY' per PTX, sorted and deduplicated. Raises PluginError if the file has no fatbin."""
    data = Path(path if path is not None else library_path()).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise PluginError(f"{path}: not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = sections[shstrndx][4]

    def name(off: int) -> str:
        return data[strtab + off:data.index(b"\0", strtab + off)].decode()

    fatbins = [s for s in sections if name(s[0]) == ".nv_fatbin"]
    if not fatbins:
        raise PluginError(f"{path}: no .nv_fatbin section (no device code)")
    found = set()
    for s in fatbins:
        off, end = s[4], s[4] + s[5]
        while off + 16 <= end:
            magic, _, header, size = struct.unpack_from("<IHHQ", data, off)
            if magic != 0xBA55ED50:
                off += 8  # fatbins are 8-byte aligned with padding in between
                continue
            entry, stop = off + header, off + header + size
            while entry + 32 <= stop:
                kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
                arch, = struct.unpack_from("<I", data, entry + 28)
                found.add(("compute_" if kind == 1 else "sm_") + str(arch))
                entry += entry_header + payload
            off = stop
    return sorted(found, key=lambda a: (a.startswith("compute"), int(a.split("_")[1])))


# ---- calling it -----------------------------------------------------------------------------------------------------

def _lib_for(*tensors: torch.Tensor) -> ctypes.CDLL:
    device = tensors[0].device
    for t in tensors:
        if t is not None and t.device != device:
            raise PluginError(f"dflash plugin op: tensors on {device} and {t.device}; put them on one device")
    lib = load_library()
    check_device(device, lib)
    return lib


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None or t.numel() == 0 else t.data_ptr()


def _stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream


def _call(lib: ctypes.CDLL, name: str, *args) -> None:
    status = getattr(lib, name)(*args)
    if status != 0:
        msg = lib.dflash_last_error().decode()
        cls = PluginArchError if status == 3 else PluginLaunchError
        raise cls(f"{name} failed ({_STATUS.get(status, status)}): {msg}")


def _logits_layout(x: torch.Tensor, what: str) -> tuple[torch.Tensor, int, int]:
    if x.dtype not in _DTYPES:
        raise PluginError(f"{what} must be float32, float16 or bfloat16 for the CUDA kernels, got {x.dtype}")
    if x.stride(-1) != 1:
        x = x.contiguous()
    return x, x.stride(0), x.stride(1)


def _i64(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.int64).contiguous()


def _f32(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float32).contiguous()


# ---- sample_accept --------------------------------------------------------------------------------------------------

@torch.library.custom_op("dflash::sample_accept", mutates_args=())
def _sample_accept_op(logits: torch.Tensor, drafts: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
                      top_p: torch.Tensor, keys: torch.Tensor, positions: torch.Tensor, stop_ids: torch.Tensor,
                      remaining: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    if not logits.is_cuda:
        return tuple(_sa_ref.sample_accept(logits, drafts, temperature, top_k, top_p, keys, positions, stop_ids,
                                           remaining))
    lib = _lib_for(logits, drafts, temperature, top_k, top_p, keys, positions, stop_ids, remaining)
    with torch.cuda.device(logits.device):
        return _sample_accept_lib(lib, _stream(logits.device), logits, drafts, temperature, top_k, top_p, keys,
                                  positions, stop_ids, remaining)


def _sample_accept_lib(lib, stream, logits, drafts, temperature, top_k, top_p, keys, positions, stop_ids, remaining):
    """The library call itself, on whatever memory the tensors live in (a GPU, or the host for the emulated build the
    tests use)."""
    n, k, vocab = logits.shape
    dev = logits.device
    x, stride_n, stride_k = _logits_layout(logits, "logits")
    drafts, positions, stop_ids = _i64(drafts), _i64(positions), _i64(stop_ids)
    top_k, keys, remaining = _i64(top_k), _i64(keys), _i64(remaining)
    temperature, top_p = _f32(temperature), _f32(top_p)
    if drafts.shape != (n, k - 1) or positions.shape != (n, k) or stop_ids.dim() != 2 or stop_ids.shape[0] != n:
        raise PluginError(f"sample_accept: logits {tuple(logits.shape)} needs drafts [n, k-1], positions [n, k], "
                          f"stop_ids [n, S]; got {tuple(drafts.shape)}, {tuple(positions.shape)}, {tuple(stop_ids.shape)}")
    for name, t in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p), ("keys", keys),
                    ("remaining", remaining)):
        if t.shape != (n,):
            raise PluginError(f"sample_accept: {name} must be [n] = [{n}], got {tuple(t.shape)}")
    tokens = torch.empty(n, k, dtype=torch.long, device=dev)
    accepted = torch.empty(n, dtype=torch.long, device=dev)
    emitted = torch.empty(n, dtype=torch.long, device=dev)
    finished = torch.empty(n, dtype=torch.bool, device=dev)
    if n == 0:
        return tokens, accepted, emitted, finished
    ws_bytes = lib.dflash_sample_accept_workspace_bytes(n, k, vocab)
    workspace = torch.empty(ws_bytes, dtype=torch.uint8, device=dev)
    _call(lib, "dflash_sample_accept", x.data_ptr(), _DTYPES[x.dtype], n, k, vocab, stride_n, stride_k, _ptr(drafts),
          temperature.data_ptr(), top_k.data_ptr(), top_p.data_ptr(), keys.data_ptr(), positions.data_ptr(),
          _ptr(stop_ids), stop_ids.shape[1], remaining.data_ptr(), tokens.data_ptr(), accepted.data_ptr(),
          emitted.data_ptr(), finished.data_ptr(), workspace.data_ptr(), ws_bytes, stream)
    return tokens, accepted, emitted, finished


@_sample_accept_op.register_fake
def _(logits, drafts, temperature, top_k, top_p, keys, positions, stop_ids, remaining):
    n, k = logits.shape[0], logits.shape[1]
    return (logits.new_empty((n, k), dtype=torch.long), logits.new_empty((n,), dtype=torch.long),
            logits.new_empty((n,), dtype=torch.long), logits.new_empty((n,), dtype=torch.bool))


def sample_accept(logits, drafts, temperature, top_k, top_p, keys, positions, stop_ids, remaining,
                  modes=None) -> _sa_ref.AcceptResult:
    """Same arguments and result as dflash_trt.kernels.sample_accept.sample_accept; the CUDA kernel on GPU (it reads
    the sampling parameters on the device: `modes` is not needed)."""
    return _sa_ref.AcceptResult(*torch.ops.dflash.sample_accept(logits, drafts, temperature, top_k, top_p, keys,
                                                                positions, stop_ids, remaining))


# ---- block drafting -------------------------------------------------------------------------------------------------

@torch.library.custom_op("dflash::prepare_block", mutates_args=())
def _prepare_block_op(last_tokens: torch.Tensor, starts: torch.Tensor, mask_token_id: int,
                      block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    if not last_tokens.is_cuda:
        return _block_ref.prepare_block(last_tokens, starts, mask_token_id, block_size)
    lib = _lib_for(last_tokens, starts)
    with torch.cuda.device(last_tokens.device):
        return _prepare_block_lib(lib, _stream(last_tokens.device), last_tokens, starts, mask_token_id, block_size)


def _prepare_block_lib(lib, stream, last_tokens, starts, mask_token_id, block_size):
    dev, n = last_tokens.device, last_tokens.shape[0]
    last_tokens, starts = _i64(last_tokens), _i64(starts)
    ids = torch.empty(n, block_size, dtype=torch.long, device=dev)
    positions = torch.empty(n, block_size, dtype=torch.long, device=dev)
    if n:
        _call(lib, "dflash_prepare_block", last_tokens.data_ptr(), starts.data_ptr(), n, mask_token_id, block_size,
              ids.data_ptr(), positions.data_ptr(), stream)
    return ids, positions


@_prepare_block_op.register_fake
def _(last_tokens, starts, mask_token_id, block_size):
    n = last_tokens.shape[0]
    return last_tokens.new_empty((n, block_size), dtype=torch.long), last_tokens.new_empty((n, block_size), dtype=torch.long)


def prepare_block(last_tokens: torch.Tensor, starts: torch.Tensor, mask_token_id: int, block_size: int):
    """= dflash_trt.kernels.block_draft.prepare_block: (ids [N, B], positions [N, B])."""
    return torch.ops.dflash.prepare_block(last_tokens, starts, int(mask_token_id), int(block_size))


@torch.library.custom_op("dflash::drafts_to_verify", mutates_args=())
def _drafts_to_verify_op(last_tokens: torch.Tensor, draft_logits: torch.Tensor,
                         starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if not draft_logits.is_cuda:
        return _block_ref.drafts_to_verify(last_tokens, draft_logits, starts)
    lib = _lib_for(last_tokens, draft_logits, starts)
    with torch.cuda.device(draft_logits.device):
        return _drafts_to_verify_lib(lib, _stream(draft_logits.device), last_tokens, draft_logits, starts)


def _drafts_to_verify_lib(lib, stream, last_tokens, draft_logits, starts):
    n, km1, vocab = draft_logits.shape
    k, dev = km1 + 1, draft_logits.device
    x, stride_n, stride_k = _logits_layout(draft_logits, "draft_logits")
    last_tokens, starts = _i64(last_tokens), _i64(starts)
    verify_ids = torch.empty(n, k, dtype=torch.long, device=dev)
    drafts = torch.empty(n, km1, dtype=torch.long, device=dev)
    positions = torch.empty(n, k, dtype=torch.long, device=dev)
    if n:
        ws_bytes = lib.dflash_drafts_to_verify_workspace_bytes(n, k, vocab)
        workspace = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device=dev)
        _call(lib, "dflash_drafts_to_verify", last_tokens.data_ptr(), _ptr(x), _DTYPES[x.dtype], n, k, vocab,
              stride_n, stride_k, starts.data_ptr(), verify_ids.data_ptr(), _ptr(drafts), positions.data_ptr(),
              workspace.data_ptr(), ws_bytes, stream)
    return verify_ids, drafts, positions


@_drafts_to_verify_op.register_fake
def _(last_tokens, draft_logits, starts):
    n, km1 = draft_logits.shape[0], draft_logits.shape[1]
    new = draft_logits.new_empty
    return (new((n, km1 + 1), dtype=torch.long), new((n, km1), dtype=torch.long), new((n, km1 + 1), dtype=torch.long))


def drafts_to_verify(last_tokens: torch.Tensor, draft_logits: torch.Tensor, starts: torch.Tensor):
    """draft_logits [N, K-1, V] -> (verify ids [N, K] = [last, drafts], drafts [N, K-1], positions [N, K])."""
    return torch.ops.dflash.drafts_to_verify(last_tokens, draft_logits, starts)


# ---- bookkeeping ----------------------------------------------------------------------------------------------------

@torch.library.custom_op("dflash::commit_step",
                         mutates_args=("target_lengths", "context", "context_counts", "drafter_lengths", "last_tokens"))
def _commit_step_op(accepted: torch.Tensor, slots: torch.Tensor, starts: torch.Tensor, target_lengths: torch.Tensor,
                    features: Optional[torch.Tensor] = None, context: Optional[torch.Tensor] = None,
                    context_counts: Optional[torch.Tensor] = None, drafter_lengths: Optional[torch.Tensor] = None,
                    target_tokens: Optional[torch.Tensor] = None, last_tokens: Optional[torch.Tensor] = None) -> None:
    if not accepted.is_cuda:
        _book_ref.commit_step(accepted, slots, starts, target_lengths, features, context, context_counts,
                              drafter_lengths, target_tokens, last_tokens)
        return
    lib = _lib_for(*(t for t in (accepted, slots, starts, target_lengths, features, context, context_counts,
                                 drafter_lengths, target_tokens, last_tokens) if t is not None))
    with torch.cuda.device(accepted.device):
        _commit_step_lib(lib, _stream(accepted.device), accepted, slots, starts, target_lengths, features, context,
                         context_counts, drafter_lengths, target_tokens, last_tokens)


def _commit_step_lib(lib, stream, accepted, slots, starts, target_lengths, features=None, context=None,
                     context_counts=None, drafter_lengths=None, target_tokens=None, last_tokens=None) -> None:
    group = (features, context, context_counts, drafter_lengths)
    if any(t is None for t in group) and any(t is not None for t in group):
        raise PluginError("commit_step: features, context, context_counts and drafter_lengths go together (all or none)")
    if (target_tokens is None) != (last_tokens is None):
        raise PluginError("commit_step: target_tokens and last_tokens go together (both or none)")
    for name, t in (("target_lengths", target_lengths), ("context_counts", context_counts),
                    ("drafter_lengths", drafter_lengths), ("last_tokens", last_tokens)):
        if t is not None and (t.dtype != torch.int64 or not t.is_contiguous() or t.dim() != 1):
            raise PluginError(f"commit_step: {name} must be a contiguous 1-D int64 tensor (it is updated in place)")
    n = accepted.shape[0]
    k = features.shape[1] if features is not None else (target_tokens.shape[1] if target_tokens is not None else 1)
    max_slots = target_lengths.shape[0]
    accepted, slots, starts = _i64(accepted), _i64(slots), _i64(starts)
    feat_dim, elem, context_k = 0, 4, 0
    if context is not None:
        if not context.is_contiguous() or context.dim() != 3 or context.dtype != features.dtype:
            raise PluginError(f"commit_step: context must be a contiguous [slots, k, F] tensor of the features' dtype "
                              f"({features.dtype}); got {tuple(context.shape)} {context.dtype}")
        if context.element_size() not in (2, 4) or features.shape[2] != context.shape[2] or context.shape[1] < k:
            raise PluginError(f"commit_step: features {tuple(features.shape)} do not fit context {tuple(context.shape)}")
        if context.shape[0] != max_slots or context_counts.shape[0] != max_slots or drafter_lengths.shape[0] != max_slots:
            raise PluginError("commit_step: context, context_counts, drafter_lengths and target_lengths need one row per slot")
        features = features.contiguous()
        feat_dim, elem, context_k = features.shape[2], features.element_size(), context.shape[1]
    if target_tokens is not None:
        target_tokens = _i64(target_tokens)
    if n == 0:
        return
    _call(lib, "dflash_commit_step", n, k, accepted.data_ptr(), slots.data_ptr(), starts.data_ptr(), max_slots,
          target_lengths.data_ptr(), _ptr(features), feat_dim, elem, _ptr(context), context_k, _ptr(context_counts),
          _ptr(drafter_lengths), _ptr(target_tokens), _ptr(last_tokens), stream)


@_commit_step_op.register_fake
def _(accepted, slots, starts, target_lengths, features=None, context=None, context_counts=None, drafter_lengths=None,
      target_tokens=None, last_tokens=None):
    return None


def commit_step(accepted, slots, starts, target_lengths, features=None, context=None, context_counts=None,
                drafter_lengths=None, target_tokens=None, last_tokens=None) -> None:
    """= dflash_trt.kernels.bookkeeping.commit_step (in place)."""
    # torch < 2.12 drops trailing None arguments before a custom op's version-counter bump, which then indexes the
    # dropped mutated ones (IndexError): without last_tokens, skip that bump, as autograd-free callers (the step) may.
    guard = torch._C._AutoDispatchBelowADInplaceOrView() if last_tokens is None else contextlib.nullcontext()
    with guard:
        torch.ops.dflash.commit_step(accepted, slots, starts, target_lengths, features, context, context_counts,
                                     drafter_lengths, target_tokens, last_tokens)


# ---- draft trees ----------------------------------------------------------------------------------------------------

@torch.library.custom_op("dflash::tree_accept", mutates_args=())
def _tree_accept_op(node_tokens: torch.Tensor, parents: torch.Tensor, depth: torch.Tensor, target_tokens: torch.Tensor,
                    stop_ids: torch.Tensor, remaining: torch.Tensor,
                    width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    if not node_tokens.is_cuda:
        path, res = _tree_ref.tree_accept(node_tokens, parents, depth, target_tokens, stop_ids, remaining, width)
        return (path,) + tuple(res)
    lib = _lib_for(node_tokens, parents, depth, target_tokens, stop_ids, remaining)
    with torch.cuda.device(node_tokens.device):
        return _tree_accept_lib(lib, _stream(node_tokens.device), node_tokens, parents, depth, target_tokens, stop_ids,
                                remaining, width)


def _tree_accept_lib(lib, stream, node_tokens, parents, depth, target_tokens, stop_ids, remaining, width):
    n, size = node_tokens.shape
    dev = node_tokens.device
    node_tokens, parents, depth, target_tokens = _i64(node_tokens), _i64(parents), _i64(depth), _i64(target_tokens)
    stop_ids, remaining = _i64(stop_ids), _i64(remaining)
    if parents.shape != (n, size) or depth.shape != (n, size) or target_tokens.shape != (n, size):
        raise PluginError(f"tree_accept: node_tokens {tuple(node_tokens.shape)} needs parents, depth and target_tokens "
                          f"of the same shape; got {tuple(parents.shape)}, {tuple(depth.shape)}, "
                          f"{tuple(target_tokens.shape)}")
    if stop_ids.dim() != 2 or stop_ids.shape[0] != n or remaining.shape != (n,):
        raise PluginError(f"tree_accept: stop_ids must be [n, S] and remaining [n] (n = {n}); got "
                          f"{tuple(stop_ids.shape)}, {tuple(remaining.shape)}")
    width = int(width)
    path = torch.empty(n, width, dtype=torch.long, device=dev)
    tokens = torch.empty(n, width, dtype=torch.long, device=dev)
    accepted = torch.empty(n, dtype=torch.long, device=dev)
    emitted = torch.empty(n, dtype=torch.long, device=dev)
    finished = torch.empty(n, dtype=torch.bool, device=dev)
    if n:
        _call(lib, "dflash_tree_accept", n, size, node_tokens.data_ptr(), parents.data_ptr(), depth.data_ptr(),
              target_tokens.data_ptr(), _ptr(stop_ids), stop_ids.shape[1], remaining.data_ptr(), width,
              path.data_ptr(), tokens.data_ptr(), accepted.data_ptr(), emitted.data_ptr(), finished.data_ptr(), stream)
    return path, tokens, accepted, emitted, finished


@_tree_accept_op.register_fake
def _(node_tokens, parents, depth, target_tokens, stop_ids, remaining, width):
    n = node_tokens.shape[0]
    new = node_tokens.new_empty
    return (new((n, width), dtype=torch.long), new((n, width), dtype=torch.long), new((n,), dtype=torch.long),
            new((n,), dtype=torch.long), new((n,), dtype=torch.bool))


def tree_accept(node_tokens, parents, depth, target_tokens, stop_ids, remaining,
                width: int) -> tuple[torch.Tensor, _sa_ref.AcceptResult]:
    """= dflash_trt.kernels.tree_accept.tree_accept: (path [n, width], AcceptResult along the path)."""
    path, *res = torch.ops.dflash.tree_accept(node_tokens, parents, depth, target_tokens, stop_ids, remaining,
                                              int(width))
    return path, _sa_ref.AcceptResult(*res)


@torch.library.custom_op("dflash::compact_kv", mutates_args=("k", "v"))
def _compact_kv_op(k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor, starts: torch.Tensor,
                   path: torch.Tensor) -> None:
    if not k.is_cuda:
        _tree_ref.compact_kv(k, v, slots, starts, path)
        return
    lib = _lib_for(k, v, slots, starts, path)
    with torch.cuda.device(k.device):
        _compact_kv_lib(lib, _stream(k.device), k, v, slots, starts, path)


def _compact_kv_lib(lib, stream, k, v, slots, starts, path) -> None:
    if k.dim() != 5 or v.shape != k.shape or v.dtype != k.dtype or not k.is_contiguous() or not v.is_contiguous():
        raise PluginError(f"compact_kv: k and v must be contiguous [layers, max_slots, capacity, kv_heads, head_dim] "
                          f"tensors of one shape and dtype; got {tuple(k.shape)} {k.dtype}, {tuple(v.shape)} {v.dtype}")
    n = slots.shape[0]
    slots, starts, path = _i64(slots), _i64(starts), _i64(path)
    if starts.shape != (n,) or path.dim() != 2 or path.shape[0] != n:
        raise PluginError(f"compact_kv: slots [n], starts [n] and path [n, W] (n = {n}); got {tuple(starts.shape)}, "
                          f"{tuple(path.shape)}")
    if n == 0 or path.shape[1] == 0:
        return
    layers, max_slots, capacity, kv_heads, head_dim = k.shape
    _call(lib, "dflash_compact_kv", k.data_ptr(), v.data_ptr(), k.element_size(), layers, max_slots, capacity,
          kv_heads, head_dim, n, slots.data_ptr(), starts.data_ptr(), path.data_ptr(), path.shape[1], stream)


@_compact_kv_op.register_fake
def _(k, v, slots, starts, path):
    return None


def compact_kv(k, v, slots, starts, path) -> None:
    """= dflash_trt.kernels.tree_accept.compact_kv (in place)."""
    torch.ops.dflash.compact_kv(k, v, slots, starts, path)


class KernelInfo(NamedTuple):
    path: str
    abi_version: int
    compiled: list[str]
    embedded: list[str]


def info(path: str | os.PathLike | None = None) -> KernelInfo:
    """What the library is (works without a GPU)."""
    path = Path(path) if path is not None else library_path()
    lib = load_library(path)
    return KernelInfo(str(path), lib.dflash_abi_version(), compiled_archs(lib), embedded_code(path))
