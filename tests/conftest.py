"""Shared fixtures: tiny random checkpoint pairs made once per session (no hub, no network)."""

from __future__ import annotations

import os

# Some VMs advertise AMX (amx_tile, amx_bf16 in /proc/cpuinfo, XTILEDATA permitted by the kernel) but fault on its
# instructions: oneDNN's bf16 GEMMs then kill the process with SIGILL. Cap oneDNN below AMX for the suite (and the
# CLI subprocesses it starts); the numerics are the same, the tests use bf16 only for correctness.
os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_FP16")

import shutil  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from dflash_trt import tiny

# one intra-op thread per pytest-xdist worker (README's command runs a worker per core): two workers' OpenMP threads
# spin-waiting for each other's cores make every forward ~10x slower (one_torch_thread says how)
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)


def pytest_collection_modifyitems(config, items):
    """test_compile.py first: its torch.compile tests take about half the suite's time on a cold Inductor cache (CI's),
    and README's command (pytest-xdist, a file per worker, in this order: --no-loadscope-reorder) then starts them on
    one worker at once while the other workers share the rest. (Split in two files for two workers, they took longer:
    a test compiles fewer graphs after another's in the same engine.) The files' own order stands otherwise."""
    items.sort(key=lambda item: item.path.name != "test_compile.py")


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op thread for a module (`pytestmark = pytest.mark.usefixtures("one_torch_thread")`): its matmuls are
    small, and when another process shares the CPU (a server the tests start, other work) OpenMP threads spin-wait
    for a core the other process holds and every forward gets ~10x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def copy_checkpoint(src: Path, dst: Path) -> Path:
    """A copy of a checkpoint directory to corrupt in a test."""
    return Path(shutil.copytree(src, dst))


def edit_safetensors(directory: Path, edit) -> None:
    """Rewrite directory/model.safetensors after edit(tensors) changed the dict in place."""
    from safetensors.torch import load_file, save_file

    path = directory / "model.safetensors"
    tensors = load_file(str(path))
    edit(tensors)
    save_file(tensors, str(path), metadata={"format": "pt"})


@pytest.fixture(scope="session")
def make_pair(tmp_path_factory):
    """make_pair(family="qwen3", tie=False, block_size=16, vocab_size=None, dtype="float32", seed=0, **target_kwargs)
    -> (target_dir, drafter_dir). vocab_size=None: with the tiny BPE tokenizer; an int: no tokenizer, token 0 = EOS,
    the last token = MASK. Cached per argument set."""
    cache: dict = {}

    def _make(family="qwen3", tie=False, block_size=16, vocab_size=None, dtype="float32", seed=0, **target_kwargs):
        key = (family, tie, block_size, vocab_size, dtype, seed, tuple(sorted(target_kwargs.items())))
        if key not in cache:
            root = tmp_path_factory.mktemp(f"pair-{family}-{vocab_size or 'tok'}")
            if vocab_size is None:
                cache[key] = tiny.make_tiny_pair(root, family=family, seed=seed, block_size=block_size, dtype=dtype,
                                                 tie=tie, **target_kwargs)
            else:
                target = tiny.make_target(root / "target", family=family, vocab_size=vocab_size, eos_id=0, tie=tie,
                                          dtype=dtype, seed=seed, **target_kwargs)
                drafter = tiny.make_drafter(root / "drafter", target, mask_token_id=vocab_size - 1,
                                            block_size=block_size, seed=seed + 1)
                cache[key] = (target, drafter)
        return cache[key]

    return _make


def emu_compile(source: Path, out: Path, *include_dirs: Path) -> Path:
    """g++ build of device code against plugins/emu/cuda_emu.h (every CUDA thread a fiber, barriers and warp shuffles
    emulated; the source reaches the header as ../emu/ from its common.cuh)."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler for the emulated build of the kernels")
    cmd = [cxx, "-std=c++20", "-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-strict-aliasing",
           "-fvisibility=hidden", "-DDFLASH_EMULATE", '-DDFLASH_COMPILED_ARCHS="emulated"', "-x", "c++",
           *(f"-I{d}" for d in include_dirs), "-o", str(out), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return out


def set_emu_schedule(lib, mode: int, seed: int = 0) -> int:
    """The emulator's thread order: 0 forward, 1 reverse, 2 seeded random (dflash_emu_set_schedule)."""
    import ctypes

    fn = lib.dflash_emu_set_schedule
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_uint64]
    return fn(mode, seed)


@pytest.fixture(scope="session")
def emu_lib(tmp_path_factory):
    """plugins/src/dflash_plugins.cu built for the emulator: the CUDA kernels' own code, callable on CPU tensors
    (kernels.ops.library_ops), in the forward thread order."""
    from dflash_trt.kernels import cuda

    root = Path(__file__).resolve().parents[1]
    out = tmp_path_factory.mktemp("emu") / "libdflash_plugins_emu.so"
    emu_compile(root / "plugins" / "src" / "dflash_plugins.cu", out, root / "plugins" / "include")
    lib = cuda.load_library(out)
    assert cuda.compiled_archs(lib) == ["emulated"]
    assert set_emu_schedule(lib, 0) == 0
    return lib
