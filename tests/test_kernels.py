"""The CUDA plugin library (plugins/, dflash_trt.kernels.cuda) against the torch references of the spec step.

CPU part (runs everywhere, skipped only if no nvcc can be found or pip-installed): scripts/build_plugins.sh compiles
and links libdflash_plugins.so with cubins for sm_90, sm_100 and sm_103 plus PTX (checked in the file's fatbin, and
with cuobjdump when there is one); it exports exactly the C ABI of plugins/include/dflash_plugins.h; ctypes loads it
without a GPU and its host-side argument checks answer with error codes and messages; missing library / wrong arch /
not a plugin library give clear PluginErrors; the torch ops on CPU tensors equal the references (and pass opcheck);
the bookkeeping reference does what the engine's loop does; a model of the kernel's radix-select threshold algorithm
keeps exactly the entries the reference's top-k / top-p filtering keeps; and the device code itself, compiled by g++
against plugins/emu/cuda_emu.h (a CPU emulation of threads, barriers, warp shuffles, shared memory and atomics) and
called through the same ctypes layer, equals every reference exactly.

GPU part (marked `gpu`, skipped without a CUDA device): every kernel against its reference on fresh random inputs
(N in {1, 7, 64, 256}, K in {2, 8, 16}, V in {1000, 151936, 262144}, float32 / float16 / bfloat16, ragged acceptance,
stop tokens inside the block, budgets), sampling by agreement with the reference, distribution and seed
reproducibility, the reference's +inf-noise corner, strided logits, streams and CUDA graphs.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest
import torch

from dflash_trt.kernels import block_draft as block_ref
from dflash_trt.kernels import bookkeeping as book_ref
from dflash_trt.kernels import cuda as K
from dflash_trt.kernels import sample_accept as sa_ref
from dflash_trt.kernels import tree_accept as tree_ref
from dflash_trt.spec.sampling import filtered_scores, seed_keys
from dflash_trt.spec.tree import build_tree, max_depth

from conftest import emu_compile, set_emu_schedule  # noqa: E402 (tests/ is on sys.path: pytest's rootdir conftest)

ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = ROOT / "scripts" / "build_plugins.sh"
HEADER = ROOT / "plugins" / "include" / "dflash_plugins.h"
ARCHS = ["sm_90", "sm_100", "sm_103", "compute_103"]
HAS_CUDA = torch.cuda.is_available()
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def gpu(fn):
    """GPU-only test: marked `gpu` (pytest -m gpu) and skipped without a CUDA device."""
    return pytest.mark.gpu(pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")(fn))


# ---- the library, built once per session ------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def plugin_lib() -> Path:
    """scripts/build_plugins.sh for sm_90/sm_100/sm_103 into plugins/build (a no-op when up to date)."""
    env = dict(os.environ, DFLASH_CUDA_ARCHS="90 100 103")
    env.pop("DFLASH_PLUGINS_BUILD_DIR", None)
    t0 = time.perf_counter()
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode == 3:
        pytest.skip(f"no nvcc to build the CUDA plugins with: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, f"build_plugins.sh failed:\n{proc.stdout}\n{proc.stderr}"
    lib = ROOT / "plugins" / "build" / "libdflash_plugins.so"
    assert lib.is_file()
    print(f"\nbuild_plugins.sh: {time.perf_counter() - t0:.1f}s, {lib.stat().st_size} bytes: {proc.stdout.strip()}")
    return lib


@pytest.fixture()
def use_lib(plugin_lib, monkeypatch):
    monkeypatch.setenv(K.LIB_ENV, str(plugin_lib))
    return plugin_lib


def _abi_functions() -> list[str]:
    return sorted(set(re.findall(r"^DFLASH_API [^(]*?\b(dflash_\w+)\(", HEADER.read_text(), flags=re.M)))


def _cuobjdump() -> str | None:
    for cand in (shutil.which("cuobjdump"), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "cuobjdump"),
                 str(ROOT / "plugins" / "build" / "cuda-toolkit" / "nvidia" / "cu13" / "bin" / "cuobjdump")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


# ---- CPU: build, symbols, loading ---------------------------------------------------------------------------------

def test_library_has_cubins_for_all_three_archs(plugin_lib):
    assert K.embedded_code(plugin_lib) == ARCHS  # read from the .nv_fatbin section itself
    tool = _cuobjdump()
    if tool is not None:  # cross-check with NVIDIA's tool where it exists
        elf = subprocess.run([tool, "--list-elf", str(plugin_lib)], capture_output=True, text=True, check=True).stdout
        ptx = subprocess.run([tool, "--list-ptx", str(plugin_lib)], capture_output=True, text=True, check=True).stdout
        for arch in ("sm_90", "sm_100", "sm_103"):
            assert f".{arch}.cubin" in elf, elf
        assert ".sm_103.ptx" in ptx, ptx


def test_library_exports_exactly_the_c_abi(plugin_lib):
    expected = _abi_functions()
    assert len(expected) == 12 and "dflash_last_error" in expected and "dflash_compact_kv" in expected
    if shutil.which("nm"):
        out = subprocess.run(["nm", "-D", "--defined-only", str(plugin_lib)], capture_output=True, text=True,
                             check=True).stdout
        exported = sorted(line.split()[-1] for line in out.splitlines() if line.split()[1:2] == ["T"])
        assert exported == expected  # nothing else: the static cudart stays hidden
    lib = ctypes.CDLL(str(plugin_lib))
    for name in expected:
        assert hasattr(lib, name)


def test_loads_without_a_gpu_and_reports_itself(use_lib):
    lib = K.load_library()
    assert lib.dflash_abi_version() == K.ABI_VERSION == 2
    assert K.compiled_archs(lib) == ARCHS
    info = K.info()
    assert info.compiled == info.embedded == ARCHS
    assert lib.dflash_sample_accept_workspace_bytes(4, 16, 151936) >= 4 * 16 * 12
    if not HAS_CUDA:
        assert lib.dflash_check_device(0) == 2  # no driver here: an error code and a message, not a crash
        assert "dflash_check_device" in lib.dflash_last_error().decode()
        assert not K.available()


def test_entry_points_validate_arguments_on_the_host(use_lib):
    lib = K.load_library()
    status = lib.dflash_sample_accept(1, 7, 2, 4, 1000, 4000, 1000, 1, 1, 1, 1, 1, 1, None, 0, 1, 1, 1, 1, 1, 1, 1 << 20,
                                      None)
    assert status == 1 and "dtype 7" in lib.dflash_last_error().decode()
    ws = lib.dflash_sample_accept_workspace_bytes(2, 4, 1000)
    status = lib.dflash_sample_accept(1, 2, 2, 4, 1000, 4000, 1000, 1, 1, 1, 1, 1, 1, None, 0, 1, 1, 1, 1, 1, 1, ws - 1,
                                      None)
    assert status == 1 and f"need {ws}" in lib.dflash_last_error().decode()
    assert lib.dflash_prepare_block(1, 1, 3, 0, 0, 1, 1, None) == 1
    assert "block_size=0" in lib.dflash_last_error().decode()
    assert lib.dflash_drafts_to_verify(1, 1, 0, 2, 4, 0, 0, 0, None, 1, 1, None, 1, 1 << 20, None) == 1
    assert "vocab=0" in lib.dflash_last_error().decode()
    assert lib.dflash_commit_step(2, 4, 1, 1, 1, 8, 1, None, 0, 4, None, 0, 1, None, None, None, None) == 1
    assert "without context" in lib.dflash_last_error().decode()
    assert lib.dflash_tree_accept(2, 0, 1, 1, 1, 1, None, 0, 1, 4, 1, 1, 1, 1, 1, None) == 1
    assert "num_nodes=0" in lib.dflash_last_error().decode()
    assert lib.dflash_tree_accept(2, 16, 1, 1, 1, 1, None, 0, 1, 2000, 1, 1, 1, 1, 1, None) == 1
    assert "width=2000" in lib.dflash_last_error().decode()
    assert lib.dflash_compact_kv(1, 1, 3, 2, 4, 64, 8, 128, 2, 1, 1, 1, 16, None) == 1
    assert "3-byte elements" in lib.dflash_last_error().decode()
    assert lib.dflash_compact_kv(None, 1, 2, 2, 4, 64, 8, 128, 2, 1, 1, 1, 16, None) == 1
    assert "NULL" in lib.dflash_last_error().decode()
    assert lib.dflash_prepare_block(None, None, 0, 0, 4, None, None, None) == 0  # n == 0: nothing to do, no CUDA call
    assert lib.dflash_tree_accept(0, 16, *[None] * 5, 0, None, 4, *[None] * 6) == 0
    assert lib.dflash_compact_kv(None, None, 2, 2, 4, 64, 8, 128, 0, None, None, None, 16, None) == 0


def test_missing_library_says_how_to_build_it(monkeypatch, tmp_path):
    assert K._display(K.DEFAULT_LIB) == "plugins/build/libdflash_plugins.so"
    monkeypatch.delenv(K.LIB_ENV, raising=False)
    monkeypatch.setattr(K, "DEFAULT_LIB", K.REPO_ROOT / "plugins" / "build" / "no_such_lib.so")
    with pytest.raises(K.PluginNotFoundError, match=r"^plugins/build/no_such_lib\.so not found: run scripts/build_plugins\.sh"):
        K.load_library()
    monkeypatch.setenv(K.LIB_ENV, str(tmp_path / "x.so"))
    with pytest.raises(K.PluginNotFoundError, match=r"x\.so \(from \$DFLASH_PLUGINS_LIB\) not found: run scripts/build"):
        K.load_library()
    assert issubclass(K.PluginNotFoundError, K.DFlashError)


def test_not_a_plugin_library_is_refused(tmp_path):
    if not shutil.which("cc"):
        pytest.skip("no C compiler to make a stand-in library")
    src = tmp_path / "fake.c"
    src.write_text("int dflash_abi_version(void) { return 99; }\n")
    lib = tmp_path / "libfake.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    with pytest.raises(K.PluginLoadError, match="lacks dflash_compiled_archs.*run scripts/build_plugins.sh"):
        K.load_library(lib)
    bad = tmp_path / "garbage.so"
    bad.write_bytes(b"not an ELF file")
    with pytest.raises(K.PluginLoadError, match="cannot be loaded"):
        K.load_library(bad)


def test_wrong_arch_message(use_lib, monkeypatch):
    if not HAS_CUDA:
        with pytest.raises(K.PluginError, match="no CUDA device"):
            K.check_device()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: "NVIDIA A100-SXM4-80GB")
    monkeypatch.setattr(K, "_checked_devices", set())
    with pytest.raises(K.PluginArchError,
                       match=r"built for sm_90,sm_100,sm_103,compute_103 but this GPU \(NVIDIA A100-SXM4-80GB\) is sm_80"):
        K.check_device(torch.device("cuda", 0))


def test_arch_compatibility_rules():
    built = ["sm_90", "sm_100", "sm_103", "compute_103"]
    assert K.arch_runs_on(built, (9, 0)) and K.arch_runs_on(built, (10, 0)) and K.arch_runs_on(built, (10, 3))
    assert K.arch_runs_on(built, (12, 0))  # via the PTX
    assert not K.arch_runs_on(built, (8, 0)) and not K.arch_runs_on(built, (8, 9))
    assert not K.arch_runs_on(["sm_100"], (9, 0)) and not K.arch_runs_on(["sm_100"], (11, 0))
    assert K.arch_runs_on(["sm_100"], (10, 3))  # same major, higher minor


# ---- CPU: the torch ops fall back to the references --------------------------------------------------------------

def _accept_inputs(n, k, vocab, dtype=torch.float32, device="cpu", seed=0, temperature=0.0, top_k=0, top_p=1.0):
    """Random logits and drafts with ragged acceptance (each row's drafts match the greedy tokens up to a random
    point), a stop token inside some blocks and a range of budgets."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    logits = (torch.randn(n, k, vocab, generator=g) * 3).to(dtype).to(device)
    greedy = logits.argmax(-1).cpu()
    cut = torch.randint(0, k, (n,), generator=g)
    drafts = greedy[:, :-1].clone()
    for i in range(n):
        if cut[i] < k - 1:
            drafts[i, cut[i]] = (drafts[i, cut[i]] + 1) % vocab
    stop_ids = torch.full((n, 2), -1, dtype=torch.long)
    has_stop = torch.rand(n, generator=g) < 0.3
    for i in range(n):
        if has_stop[i]:
            stop_ids[i, 0] = greedy[i, torch.randint(0, k, (1,), generator=g)]
    remaining = torch.randint(1, k + 3, (n,), generator=g)
    temp = torch.full((n,), float(temperature)) if not isinstance(temperature, torch.Tensor) else temperature
    tk = torch.full((n,), int(top_k), dtype=torch.long) if not isinstance(top_k, torch.Tensor) else top_k
    tp = torch.full((n,), float(top_p)) if not isinstance(top_p, torch.Tensor) else top_p
    keys = seed_keys(torch.randint(0, 2**62, (n,), generator=g))
    positions = torch.randint(0, 100000, (n, 1), generator=g) + torch.arange(k)
    args = (logits, drafts, temp, tk, tp, keys, positions, stop_ids, remaining)
    return tuple(a.to(device) for a in args)


def _assert_accept_equal(got, want):
    for name, a, b in zip(sa_ref.AcceptResult._fields, got, want):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert torch.equal(a.cpu(), b.cpu()), name


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.0, 0, 1.0), (0.8, 0, 1.0), (1.0, 20, 0.9), (0.7, 0, 0.5)])
def test_cpu_ops_equal_references_sample_accept(temperature, top_k, top_p):
    args = _accept_inputs(5, 6, 300, temperature=temperature, top_k=top_k, top_p=top_p)
    _assert_accept_equal(K.sample_accept(*args), sa_ref.sample_accept(*args))
    prefill = (args[0][:, :1], args[1][:, :0]) + args[2:6] + (args[6][:, :1],) + args[7:]
    _assert_accept_equal(K.sample_accept(*prefill), sa_ref.sample_accept(*prefill))  # k = 1 (prefill)


def test_cpu_ops_equal_references_block_ops():
    last, starts = torch.tensor([5, 6, 7]), torch.tensor([10, 0, 99])
    for got, want in zip(K.prepare_block(last, starts, 1000, 16), block_ref.prepare_block(last, starts, 1000, 16)):
        assert torch.equal(got, want)
    logits = torch.randn(3, 7, 500)
    ids, drafts, pos = K.drafts_to_verify(last, logits, starts)
    want_ids, want_drafts = block_ref.drafts_to_verify_input(last, logits)
    assert torch.equal(ids, want_ids) and torch.equal(drafts, want_drafts)
    assert torch.equal(pos, starts[:, None] + torch.arange(8))
    assert torch.equal(pos, block_ref.prepare_block(last, starts, 0, 8)[1])  # the verify input sits where the block does


def test_cpu_ops_equal_references_tree_ops():
    *args, width = _tree_case(16, 16, seed=3)
    path, res = K.tree_accept(*args, width)
    want_path, want = tree_ref.tree_accept(*args, width)
    assert torch.equal(path, want_path)
    _assert_accept_equal(res, want)
    kv = _kv_case(2, 6, 40, 2, 4, torch.float32, 3, width, 16, seed=3)
    got, ref = tuple(t.clone() for t in kv), tuple(t.clone() for t in kv)
    K.compact_kv(*got)
    tree_ref.compact_kv(*ref)
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1]) and not torch.equal(got[0], kv[0])


def test_ops_pass_opcheck_on_cpu():
    args = _accept_inputs(3, 4, 64, temperature=1.0, top_k=5)
    torch.library.opcheck(torch.ops.dflash.sample_accept.default, args)
    torch.library.opcheck(torch.ops.dflash.prepare_block.default, (torch.tensor([1, 2]), torch.tensor([3, 4]), 9, 4))
    torch.library.opcheck(torch.ops.dflash.drafts_to_verify.default,
                          (torch.tensor([1, 2]), torch.randn(2, 3, 50), torch.tensor([3, 4])))
    state = _commit_inputs(3, 4, 6, 8, torch.float32, "cpu", seed=1)
    torch.library.opcheck(torch.ops.dflash.commit_step.default, state)
    *args, width = _tree_case(9, 4, seed=1)
    torch.library.opcheck(torch.ops.dflash.tree_accept.default, (*args, width))
    torch.library.opcheck(torch.ops.dflash.compact_kv.default, _kv_case(2, 5, 30, 2, 4, torch.float32, 3, 4, 9, seed=1))


# ---- CPU: bookkeeping reference semantics ----------------------------------------------------------------------------

def _commit_inputs(n, k, feat, max_slots, dtype, device, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    slots = torch.randperm(max_slots, generator=g)[:n]
    accepted = torch.randint(0, k, (n,), generator=g)
    starts = torch.randint(5, 1000, (n,), generator=g)
    target_lengths = torch.randint(0, 1000, (max_slots,), generator=g)
    target_lengths[slots] = starts
    features = torch.randn(n, k, feat, generator=g).to(dtype)
    context = torch.randn(max_slots, k, feat, generator=g).to(dtype)
    context_counts = torch.randint(1, k + 1, (max_slots,), generator=g)
    drafter_lengths = torch.randint(0, 1000, (max_slots,), generator=g)
    target_tokens = torch.randint(0, 50000, (n, k), generator=g)
    last_tokens = torch.randint(0, 50000, (max_slots,), generator=g)
    t = (accepted, slots, starts, target_lengths, features, context, context_counts, drafter_lengths, target_tokens,
         last_tokens)
    return tuple(x.to(device) for x in t)


# ---- draft trees: inputs ---------------------------------------------------------------------------------------------

def _tree_case(num_nodes, block_size, seed, vocab=40, device="cpu"):
    """2 * W rows of best-first trees (spec.tree.build_tree over random drafter logits, every other row peaked so that
    its greedy chain reaches the full depth D = W - 1) with target tokens that accept a chosen root path: row r's path
    ends at a node of depth (r // 2) % W where the tree has one (so every accepted length 0..D occurs, zero and full
    acceptance included), the target's token there matching none of that node's children. Stop ids: a token of the
    path for a third of the rows, absent for another third; budgets 1..W+2. Returns (node_tokens, parents, depth,
    target_tokens, stop_ids, remaining, width)."""
    depth_max = max_depth(num_nodes, block_size)
    width = depth_max + 1
    n = 2 * width
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, depth_max, vocab, generator=g)
    peak = torch.randint(0, vocab, (n // 2, depth_max, 1), generator=g)
    logits[0::2].scatter_add_(2, peak, torch.full(peak.shape, 12.0))
    tree = build_tree(logits, torch.randint(0, vocab, (n,), generator=g), num_nodes)
    target = torch.randint(0, vocab, (n, num_nodes), generator=g)
    stop_ids = torch.full((n, 3), -1, dtype=torch.long)
    for r in range(n):
        parents, depth, tokens = tree.parents[r].tolist(), tree.depth[r].tolist(), tree.tokens[r].tolist()
        at = [i for i in range(num_nodes) if depth[i] == (r // 2) % width]
        at = at or [max(range(num_nodes), key=depth.__getitem__)]
        end = at[int(torch.randint(0, len(at), (1,), generator=g))]
        path = [end]
        while parents[path[-1]] >= 0:
            path.append(parents[path[-1]])
        path.reverse()
        for parent, child in zip(path, path[1:]):
            target[r, parent] = tokens[child]
        children = {tokens[i] for i in range(num_nodes) if parents[i] == end}
        target[r, end] = next(t for t in torch.randperm(vocab + 1, generator=g).tolist() if t not in children)
        if r % 3 == 0:
            stop_ids[r, 1] = target[r, path[int(torch.randint(0, len(path), (1,), generator=g))]]
        elif r % 3 == 1:
            stop_ids[r, 0] = vocab + 5
    remaining = torch.randint(1, width + 3, (n,), generator=g)
    args = (tree.tokens, tree.parents, tree.depth, target, stop_ids, remaining)
    return tuple(a.to(device) for a in args) + (width,)


def _random_paths(n, width, num_nodes, g):
    """Accepted paths as tree_accept returns them: node 0, then a strictly increasing node index per depth (parents
    precede children, so a node's index is >= its depth), padded with the last node; row r accepts min(r % W, N - 1)
    drafts, and row 1 is the shift [0, 2, 3, .., W] when N > W (every depth reads the position the next one writes)."""
    paths = torch.zeros(n, width, dtype=torch.long)
    for r in range(n):
        a = min(r % width, num_nodes - 1)
        nodes = (torch.randperm(num_nodes - 1, generator=g)[:a].sort().values + 1).tolist()
        if r == 1 and num_nodes > width:
            nodes = list(range(2, width + 1))
        row = [0] + nodes
        paths[r] = torch.tensor(row + row[-1:] * (width - len(row)))
    return paths


def _kv_case(layers, max_slots, capacity, kv_heads, head_dim, dtype, n, width, num_nodes, seed, device="cpu"):
    """(k, v, slots, starts, path): a random cache [layers, max_slots, capacity, kv_heads, head_dim], n scattered
    distinct slots, starts that leave room for N nodes, paths from _random_paths."""
    g = torch.Generator().manual_seed(seed)
    shape = (layers, max_slots, capacity, kv_heads, head_dim)
    k, v = torch.randn(shape, generator=g).to(dtype), torch.randn(shape, generator=g).to(dtype)
    slots = torch.randperm(max_slots, generator=g)[:n]
    starts = torch.randint(0, capacity - max(width, num_nodes) + 1, (n,), generator=g)
    path = _random_paths(n, width, num_nodes, g)
    return tuple(t.to(device) for t in (k, v, slots, starts, path))


def test_commit_step_reference_semantics():
    accepted, slots, starts = torch.tensor([2, 0]), torch.tensor([3, 1]), torch.tensor([40, 7])
    target_lengths = torch.tensor([9, 7, 9, 40, 9])
    context = torch.zeros(5, 4, 2)
    features = torch.arange(16, dtype=torch.float32).reshape(2, 4, 2) + 1
    counts = torch.tensor([1, 2, 3, 4, 1])
    drafter_lengths = torch.tensor([10, 20, 30, 40, 50])
    tokens, last = torch.tensor([[11, 12, 13, 14], [21, 22, 23, 24]]), torch.zeros(5, dtype=torch.long)
    book_ref.commit_step(accepted, slots, starts, target_lengths, features, context, counts, drafter_lengths, tokens, last)
    assert target_lengths.tolist() == [9, 8, 9, 43, 9]  # start + accepted + 1, other slots untouched
    assert drafter_lengths.tolist() == [10, 22, 30, 44, 50]  # += the previous counts
    assert counts.tolist() == [1, 1, 3, 3, 1]  # accepted + 1
    assert last.tolist() == [0, 21, 0, 13, 0]  # target token at the accepted index (the bonus)
    assert torch.equal(context[3, :3], features[0, :3]) and not context[3, 3].any()  # first a + 1 rows only
    assert torch.equal(context[1, :1], features[1, :1]) and not context[1, 1:].any()
    assert not context[[0, 2, 4]].any()
    # AR: only the target lengths (and optionally the last tokens)
    tl = torch.zeros(3, dtype=torch.long)
    book_ref.commit_step(torch.tensor([0]), torch.tensor([2]), torch.tensor([5]), tl)
    assert tl.tolist() == [0, 0, 6]


def test_commit_step_matches_the_engine_loop():
    """Replay TorchEngine._run_batch's own updates (the drafter-length commit in _draft, then the post-accept block)
    and compare everything the next step can observe."""
    for seed in range(5):
        n, k, feat, max_slots = 5, 6, 8, 9
        state = _commit_inputs(n, k, feat, max_slots, torch.float32, "cpu", seed=seed)
        accepted, slots, starts, target_lengths, features, context, counts, drafter_lengths, tokens, last = state
        # the engine (lengths live in KVCache.lengths; `act` are the slots; context rows past counts are don't-care)
        e_tl, e_dl, e_ctx, e_cnt, e_last = (t.clone() for t in (target_lengths, drafter_lengths, context, counts, last))
        e_dl[slots] = e_dl[slots] + e_cnt[slots]  # _draft: drafter_cache.set_lengths(act, lengths[act] + counts)
        e_tl[slots] = starts + accepted + 1  # target_cache.set_lengths(act, starts + res.accepted + 1)
        e_last[slots] = tokens.gather(1, accepted[:, None])[:, 0]  # last[act] = bonus
        e_ctx[slots] = features  # context[act] = features
        e_cnt[slots] = accepted + 1  # context_counts[act] = res.accepted + 1
        book_ref.commit_step(*state)
        assert torch.equal(target_lengths, e_tl) and torch.equal(drafter_lengths, e_dl)
        assert torch.equal(counts, e_cnt) and torch.equal(last, e_last)
        for s in range(max_slots):
            c = int(e_cnt[s])
            assert torch.equal(context[s, :c], e_ctx[s, :c])


# ---- CPU: the kernel's threshold algorithm (a faithful model of sa::prepare_kernel) ---------------------------------

_PASSES = ((21, 0x7FF), (10, 0x7FF), (0, 0x3FF))


def _keys(s: torch.Tensor) -> torch.Tensor:
    s = torch.where(s == 0, torch.zeros_like(s), s)
    b = s.view(torch.int32).long() & 0xFFFFFFFF
    key = torch.where(b >= 0x80000000, b ^ 0xFFFFFFFF, b | 0x80000000)
    return torch.where(torch.isnan(s), torch.full_like(key, 0xFFFFFFFF), key)


def _key_float(key: int) -> float:
    bits = key & 0x7FFFFFFF if key & 0x80000000 else (~key) & 0xFFFFFFFF
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _model_threshold(scores: torch.Tensor, top_k: int, top_p: float) -> float:
    """Keep-threshold of one row as the prepare kernel computes it: radix select on the order-preserving keys; top-k
    by counts, top-p by fixed-point (2^-44) masses exp(s - max), the lowest non-empty bin whose mass strictly above
    it is < top_p * Z."""
    vocab, keys = scores.numel(), _keys(scores)
    thr = float("-inf")
    if 0 < top_k < vocab:
        prefix = prefmask = 0
        need = top_k
        for shift, digit in _PASSES:
            sel = (keys & prefmask) == prefix
            hist = torch.bincount((keys[sel] >> shift) & digit, minlength=2048)
            above = hist.flip(0).cumsum(0).flip(0) - hist  # strictly above each bin
            b = int(((above < need) & (need <= above + hist)).nonzero()[0])
            need -= int(above[b])
            prefix |= b << shift
            prefmask |= digit << shift
        thr = _key_float(prefix)
    if top_p < 1:
        w = (torch.exp(scores - scores.max()) * 2.0**44).round().long()  # float32 exp, like expf
        kept = scores >= thr
        prefix = prefmask = above_prefix = 0
        target = 0.0
        for i, (shift, digit) in enumerate(_PASSES):
            sel = kept & ((keys & prefmask) == prefix)
            bins = (keys[sel] >> shift) & digit
            count = torch.bincount(bins, minlength=2048)
            mass = torch.zeros(2048, dtype=torch.long).scatter_add_(0, bins, w[sel])
            if i == 0:
                target = float(torch.tensor(top_p, dtype=torch.float32)) * float(int(mass.sum()))
            above = above_prefix + mass.flip(0).cumsum(0).flip(0) - mass
            b = int(((count > 0) & (above.double() < target)).nonzero()[0])
            above_prefix = int(above[b])
            prefix |= b << shift
            prefmask |= digit << shift
        thr = _key_float(prefix)
    return thr


@pytest.mark.parametrize("kind", ["randn", "ties", "peaked"])
def test_kernel_threshold_algorithm_keeps_what_the_reference_keeps(kind):
    g = torch.Generator().manual_seed({"randn": 0, "ties": 1, "peaked": 2}[kind])
    n, vocab = 40, 3000
    if kind == "randn":
        logits = torch.randn(n, 1, vocab, generator=g) * 2
    elif kind == "ties":  # many exact ties, including at the top-k / top-p cuts
        logits = torch.randint(-6, 6, (n, 1, vocab), generator=g).float() * 0.5
    else:  # one dominant token, a long flat tail
        logits = torch.randn(n, 1, vocab, generator=g) * 0.1
        logits[:, :, 7] += 12
    temperature = torch.rand(n, generator=g) * 1.5 + 0.2
    top_k = torch.randint(0, 400, (n,), generator=g) * (torch.rand(n, generator=g) < 0.7)
    top_p = torch.where(torch.rand(n, generator=g) < 0.7, torch.rand(n, generator=g) * 0.98 + 0.01, torch.ones(n))
    top_k[0], top_p[0] = 1, 1.0  # argmax-like sampling
    top_k[1], top_p[1] = vocab - 1, 1.0
    for i in range(n):
        # one row at a time: in a batch with some top_p < 1, the reference also runs its float32 cumsum over the
        # top_p == 1 rows, and where that sum rounds to 1.0 before the end it drops their far tail (see the report in
        # plugins/README.md); the kernel treats top_p >= 1 as off per row.
        row = slice(i, i + 1)
        want = torch.isfinite(filtered_scores(logits[row], temperature[row], top_k[row], top_p[row]))[0, 0]
        scores = logits[i, 0] / temperature[i].clamp_min(1e-6)
        thr = _model_threshold(scores, int(top_k[i]), float(top_p[i]))
        assert torch.equal(scores >= thr, want), (i, int(top_k[i]), float(top_p[i]))


# ---- CPU: the device code itself, under emulation ----------------------------------------------------------------
# plugins/src/dflash_plugins.cu built with g++ against plugins/emu/cuda_emu.h (every CUDA thread a fiber, barriers and
# warp shuffles emulated), called through the same ctypes layer as the GPU build, on CPU tensors. Every comparison
# runs under several thread orders (dflash_emu_set_schedule): the default forward order, reverse, and seeded random
# orders; a kernel without races gives bit-identical results under all of them.

EMU_ORDERS = (("reverse", 1, 0), ("random:1", 2, 1), ("random:2", 2, 2), ("random:3", 2, 3))  # besides forward


def _emu_compile(source: Path, out: Path, *include_dirs: Path) -> Path:
    return emu_compile(source, out, *include_dirs)


def _set_emu_order(lib, mode: int, seed: int = 0) -> None:
    assert set_emu_schedule(lib, mode, seed) == 0


def test_emulated_schedule_modes(emu_lib):
    assert set_emu_schedule(emu_lib, 3, 0) == 1  # unknown mode: refused, order unchanged
    _set_emu_order(emu_lib, 0)


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().cpu()
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]) if t.is_floating_point() else t


def _in_all_orders(lib, run):
    """run() (-> a tensor or a tuple of tensors) under the forward order, then under each of EMU_ORDERS: every
    order's outputs must equal forward's bit for bit. Returns forward's outputs; leaves the order at forward."""
    _set_emu_order(lib, 0)
    first = run()
    flat = (first,) if isinstance(first, torch.Tensor) else tuple(first)
    try:
        for name, mode, seed in EMU_ORDERS:
            _set_emu_order(lib, mode, seed)
            again = run()
            again = (again,) if isinstance(again, torch.Tensor) else tuple(again)
            assert len(again) == len(flat)
            for i, (a, b) in enumerate(zip(flat, again)):
                assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(_bits(a), _bits(b)), \
                    f"output {i} differs between the forward and the {name} thread order"
    finally:
        _set_emu_order(lib, 0)
    return first


def _emu_accept(lib, *args):
    return _in_all_orders(lib, lambda: K._sample_accept_lib(lib, None, *args))


EMU_CASES = {  # name: (temperature, top_k, top_p)
    "greedy": (0.0, 0, 1.0), "sampled": (0.9, 0, 1.0), "top_k": (0.8, 25, 1.0), "top_p": (1.1, 0, 0.7),
    "both": (1.2, 60, 0.9), "top_k_1": (1.0, 1, 1.0),
}


@pytest.mark.parametrize("case", list(EMU_CASES))
@pytest.mark.parametrize("dtype", DTYPES)
def test_emulated_sample_accept_equals_reference(emu_lib, case, dtype):
    temperature, top_k, top_p = EMU_CASES[case]
    for n, k, vocab in ((3, 4, 1000), (2, 3, 257)):  # 257: rows not 16-byte aligned (scalar head / tail)
        args = _accept_inputs(n, k, vocab, dtype=dtype, seed=vocab + k, temperature=temperature, top_k=top_k,
                              top_p=top_p)
        _assert_accept_equal(_emu_accept(emu_lib, *args), sa_ref.sample_accept(*args))


def test_emulated_sample_accept_mixed_batch_split_rows_and_views(emu_lib):
    n, k, vocab = 6, 3, 9000  # > 4096: the argmax splits each row over several blocks
    temperature = torch.tensor([0.0, 0.7, 1.0, 1.3, 0.0, 0.9])
    top_k = torch.tensor([0, 0, 40, 0, 7, 3000])
    top_p = torch.tensor([1.0, 1.0, 1.0, 0.8, 0.5, 0.95])
    args = list(_accept_inputs(n, k, vocab, dtype=torch.bfloat16, seed=5, temperature=temperature, top_k=top_k,
                               top_p=top_p))
    wide = torch.randn(n, k + 2, vocab, generator=torch.Generator().manual_seed(6)).to(torch.bfloat16)
    args[0] = wide[:, 1:1 + k]  # a strided view, as when logits come from a slice of the block
    want = sa_ref.sample_accept(*args)
    _assert_accept_equal(_emu_accept(emu_lib, *args), want)
    prefill = [args[0][:, :1], args[1][:, :0]] + args[2:6] + [args[6][:, :1]] + args[7:]
    _assert_accept_equal(_emu_accept(emu_lib, *prefill), sa_ref.sample_accept(*prefill))
    sub = [a[2:4] for a in args]  # a row's tokens do not depend on the rest of the batch
    assert torch.equal(_emu_accept(emu_lib, *sub)[0], want.target_tokens[2:4])


def test_emulated_sampling_ties_at_the_cuts(emu_lib):
    n, k, vocab = 4, 2, 600
    logits = torch.randint(-4, 4, (n, k, vocab), generator=torch.Generator().manual_seed(8)).float() * 0.5
    for top_k, top_p in ((3, 1.0), (90, 1.0), (0, 0.3), (120, 0.6)):
        args = list(_accept_inputs(n, k, vocab, seed=top_k, temperature=0.9, top_k=top_k, top_p=top_p))
        args[0] = logits
        _assert_accept_equal(_emu_accept(emu_lib, *args), sa_ref.sample_accept(*args))


def test_noise_is_always_finite():
    """u = ((h >> 9) + 0.5) * 2^-23 stays strictly inside (0, 1) in float32, so no entry gets infinite noise (with a
    24-bit u, h >> 8 == 2^24 - 1 rounded to 1.0 and a filtered-out token could win). Checked at the extreme hashes."""
    from dflash_trt.spec import sampling

    h = torch.tensor([0, 1 << 9, (1 << 32) - 1, (1 << 32) - (1 << 9)], dtype=torch.int64)
    u = ((h >> 9).to(torch.float32) + 0.5) * (1.0 / (1 << 23))
    assert bool((u > 0).all()) and bool((u < 1).all())
    noise = sampling.gumbel_noise(seed_keys(torch.arange(8)), torch.arange(8 * 64).reshape(8, 64), 151936)
    assert bool(torch.isfinite(noise).all()) and float(noise.max()) < 17.5


def test_emulated_block_ops_equal_references(emu_lib):
    drafts_ref = block_ref.drafts_to_verify
    last, starts = torch.tensor([5, 6, 7]), torch.tensor([10, 0, 99])
    for b in (1, 4, 16):
        got = _in_all_orders(emu_lib, lambda: K._prepare_block_lib(emu_lib, None, last, starts, 1000, b))
        want = block_ref.prepare_block(last, starts, 1000, b)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    for dtype in DTYPES:
        for k, vocab in ((1, 50), (4, 257), (3, 5000)):
            wide = torch.randn(3, k + 1, vocab, generator=torch.Generator().manual_seed(k)).to(dtype)
            logits = wide[:, 1:k]
            if k > 1:
                logits[0, :, 3] = logits[0].max()  # a tie for the max: first index wins
            got = _in_all_orders(emu_lib, lambda: K._drafts_to_verify_lib(emu_lib, None, last, logits, starts))
            for a, b in zip(got, drafts_ref(last, logits, starts)):
                assert torch.equal(a, b)


@pytest.mark.parametrize("dtype,feat", [(torch.float32, 48), (torch.bfloat16, 40), (torch.float16, 5)])
def test_emulated_commit_step_equals_reference(emu_lib, dtype, feat):
    state = _commit_inputs(5, 4, feat, 8, dtype, "cpu", seed=feat)

    def commit(*inputs):  # in place: each order gets fresh copies of the inputs
        inputs = tuple(t.clone() for t in inputs)
        K._commit_step_lib(emu_lib, None, *inputs)
        return inputs

    got = _in_all_orders(emu_lib, lambda: commit(*state))
    ref = tuple(t.clone() for t in state)
    book_ref.commit_step(*ref)
    for a, b in zip(got, ref):
        assert torch.equal(a, b)
    tl = _in_all_orders(emu_lib, lambda: commit(state[0], state[1], state[2], state[3]))[3]  # AR: target lengths only
    want = state[3].clone()
    book_ref.commit_step(state[0], state[1], state[2], want)
    assert torch.equal(tl, want)


TREE_SIZES = ((2, 16), (3, 16), (9, 4), (16, 16), (33, 16), (64, 16), (64, 64))  # (nodes N, drafter block B)


@pytest.mark.parametrize("num_nodes,block_size", TREE_SIZES)
def test_emulated_tree_accept_equals_reference(emu_lib, num_nodes, block_size):
    *args, width = _tree_case(num_nodes, block_size, seed=num_nodes + block_size)
    want_path, want = tree_ref.tree_accept(*args, width)
    got = _in_all_orders(emu_lib, lambda: K._tree_accept_lib(emu_lib, None, *args, width))
    assert got[0].dtype == want_path.dtype and torch.equal(got[0], want_path)
    _assert_accept_equal(got[1:], want)
    # what the case covers: every accepted length 0..D (none and the full depth included), stops and budgets
    assert sorted(set(want.accepted.tolist())) == list(range(width))
    if width >= 8:
        stopped = torch.tensor([bool((want.target_tokens[r, :int(e)] == args[4][r, :, None]).any())
                                for r, e in enumerate(want.num_emitted)])
        budget = want.num_emitted == args[5]
        assert bool((stopped & (want.num_emitted < want.accepted + 1)).any())  # a stop inside the accepted path
        assert bool((budget & ~stopped & (want.num_emitted < want.accepted + 1)).any())  # the budget cuts the path
        assert bool((~want.finished).any())
    empty = K._tree_accept_lib(emu_lib, None, *(a[:0] for a in args), width)
    assert empty[0].shape == (0, width) and empty[4].shape == (0,)


KV_CASES = {  # name: (layers, max_slots, capacity, kv_heads, head_dim, dtype, n, width W, nodes N)
    "float32": (2, 7, 96, 2, 8, torch.float32, 5, 16, 64),  # 64-byte vectors: 16-byte copies
    "bfloat16": (3, 6, 90, 2, 16, torch.bfloat16, 4, 16, 40),
    "float16-odd": (2, 5, 40, 1, 3, torch.float16, 3, 8, 20),  # 6-byte vectors: 2-byte copies
    "bfloat16-chunks": (1, 4, 140, 4, 130, torch.bfloat16, 3, 64, 64),  # W = 64: 1040 bytes in 512 + 512 + 16
    "float32-partial": (1, 3, 100, 4, 64, torch.float32, 3, 40, 50),  # W = 40: 1024 bytes in 816 + 208
}


def _emu_compact(lib, k, v, slots, starts, path):
    k, v = k.clone(), v.clone()  # in place: each run gets fresh copies
    K._compact_kv_lib(lib, None, k, v, slots, starts, path)
    return k, v


@pytest.mark.parametrize("case", list(KV_CASES))
def test_emulated_compact_kv_equals_reference(emu_lib, case):
    k, v, slots, starts, path = _kv_case(*KV_CASES[case], seed=len(case))
    got = _in_all_orders(emu_lib, lambda: _emu_compact(emu_lib, k, v, slots, starts, path))
    want_k, want_v = k.clone(), v.clone()
    tree_ref.compact_kv(want_k, want_v, slots, starts, path)
    assert torch.equal(_bits(got[0]), _bits(want_k)) and torch.equal(_bits(got[1]), _bits(want_v))
    assert not torch.equal(want_k, k)  # something moved
    for r in range(path.shape[0]):  # the path proper moved, its padding (last node repeated) left alone
        pos = int(starts[r]) + torch.arange(path.shape[1])
        pad = torch.zeros(path.shape[1], dtype=torch.bool)
        pad[1:] = path[r, 1:] == path[r, :-1]
        row, src = int(slots[r]), int(starts[r]) + path[r]
        assert torch.equal(_bits(want_k[:, row, pos[~pad]]), _bits(k[:, row, src[~pad]]))
        assert torch.equal(_bits(want_k[:, row, pos[pad]]), _bits(k[:, row, pos[pad]]))
    assert bool((path[:, 1:] == path[:, :-1]).any())  # the cases have padding


def test_emulated_compact_kv_of_accepted_trees(emu_lib):
    """The paths tree_accept finds (from the kernel itself), compacted, equal the references end to end."""
    *args, width = _tree_case(64, 16, seed=9)
    path, _ = K._tree_accept_lib(emu_lib, None, *args, width)[:2]
    n = path.shape[0]
    k, v, slots, starts, _ = _kv_case(2, n + 5, 100, 2, 8, torch.bfloat16, n, width, 64, seed=9)
    got = _in_all_orders(emu_lib, lambda: _emu_compact(emu_lib, k, v, slots, starts, path))
    want_k, want_v = k.clone(), v.clone()
    tree_ref.compact_kv(want_k, want_v, slots, starts, tree_ref.tree_accept(*args, width)[0])
    assert torch.equal(_bits(got[0]), _bits(want_k)) and torch.equal(_bits(got[1]), _bits(want_v))


def test_emulated_orders_catch_a_compaction_without_its_barrier(emu_lib, tmp_path):
    """compact_kv_kernel stages its sources before a __syncthreads and writes after it. Without that barrier a thread
    can overwrite a position (depth d's destination) before the thread that reads it as a source (depth d - 1 on the
    shift path [0, 2, 3, ..]) has read it. The forward order happens to run each reader before the writer of its
    source and misses it; reverse and the random orders give wrong caches. The intact kernel is exact in every order."""
    case = _kv_case(2, 4, 60, 2, 8, torch.float32, 3, 16, 40, seed=2)  # 4 16-byte units x 16 depths per block
    want_k, want_v = case[0].clone(), case[1].clone()
    tree_ref.compact_kv(want_k, want_v, *case[2:])
    root = tmp_path / "patched"
    for d in ("src", "include", "emu"):
        shutil.copytree(ROOT / "plugins" / d, root / d)
    source = root / "src" / "tree_accept.cuh"
    text = source.read_text()
    barrier = "  __syncthreads();  // every read of the block is done before any write: gather-then-scatter\n"
    assert text.count(barrier) == 1, "compact_kv_kernel changed: update the patch"
    source.write_text(text.replace(barrier, ""))
    patched = K.load_library(_emu_compile(root / "src" / "dflash_plugins.cu", root / "libpatched.so", root / "include"))
    orders = (("forward", 0, 0),) + EMU_ORDERS
    wrong = {}
    for name, lib in (("intact", emu_lib), ("patched", patched)):
        for order, mode, seed in orders:
            _set_emu_order(lib, mode, seed)
            k, v = _emu_compact(lib, *case)
            wrong[name, order] = int((k != want_k).sum() + (v != want_v).sum())
        _set_emu_order(lib, 0)
    assert all(wrong["intact", order] == 0 for order, _, _ in orders), wrong
    assert wrong["patched", "reverse"] > 0 and sum(wrong["patched", order] > 0 for order, _, _ in orders) >= 3, wrong


# block_sum then block_suffix_exclusive on one scratch buffer. prepare_kernel (top-p, first pass) makes the same two
# calls, but on the same operand, so there a missing barrier lets a warp overwrite scratch with the value a slower
# warp is about to read anyway: no order can change its output. This probe gives the calls different operands.
RACE_PROBE = r"""
#include "../include/dflash_plugins.h"
#include "common.cuh"

namespace {
__global__ void sum_then_suffix_kernel(const unsigned long long* a, const unsigned long long* b,
                                       unsigned long long* sums, unsigned long long* suffix) {
  __shared__ unsigned long long scratch[32];
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned long long s = dflash::block_sum(a[i], scratch);
  suffix[i] = dflash::block_suffix_exclusive(b[i], scratch);
  sums[i] = s;
}
}  // namespace

extern "C" DFLASH_API void dflash_probe_sum_then_suffix(const unsigned long long* a, const unsigned long long* b,
                                                        unsigned long long* sums, unsigned long long* suffix,
                                                        int blocks, int threads) {
  DFLASH_LAUNCH(sum_then_suffix_kernel, static_cast<unsigned>(blocks), static_cast<unsigned>(threads), 0, nullptr)(
      a, b, sums, suffix);
}
"""


def test_emulated_orders_catch_a_missing_barrier(tmp_path):
    """Without the leading __syncthreads of block_suffix_exclusive, a warp that gets ahead overwrites scratch while
    slower warps still read the previous call's values there (write-after-read). The forward order runs warps in
    lock step and misses it; the seeded random orders let a warp run ahead and catch it. With the barrier, every
    order gives the exact result."""
    blocks, threads = 4, 512  # prepare_kernel's block size: 16 warps
    g = torch.Generator().manual_seed(11)
    a = torch.randint(0, 1 << 20, (blocks, threads), generator=g)
    b = torch.randint(0, 1 << 20, (blocks, threads), generator=g)
    want_sums = a.sum(1, keepdim=True).expand(blocks, threads)
    want_suffix = b.flip(1).cumsum(1).flip(1) - b  # thread t: sum of b over threads t+1..
    orders = (("forward", 0, 0),) + EMU_ORDERS + tuple((f"random:{s}", 2, s) for s in (4, 5, 6))
    wrong = {}
    for variant in ("intact", "patched"):
        root = tmp_path / variant
        for d in ("src", "include", "emu"):
            shutil.copytree(ROOT / "plugins" / d, root / d)
        if variant == "patched":
            common = root / "src" / "common.cuh"
            text = common.read_text()
            barrier = "  __syncthreads();\n  if (lane == 0) scratch[warp] = incl;"
            assert text.count(barrier) == 1, "block_suffix_exclusive changed: update the patch"
            common.write_text(text.replace(barrier, "  if (lane == 0) scratch[warp] = incl;"))
        (root / "src" / "race_probe.cu").write_text(RACE_PROBE)
        lib = ctypes.CDLL(str(_emu_compile(root / "src" / "race_probe.cu", root / "libprobe.so")))
        probe = lib.dflash_probe_sum_then_suffix
        probe.restype, probe.argtypes = None, [ctypes.c_void_p] * 4 + [ctypes.c_int, ctypes.c_int]
        for name, mode, seed in orders:
            _set_emu_order(lib, mode, seed)
            sums, suffix = torch.full_like(a, -1), torch.full_like(a, -1)
            probe(a.data_ptr(), b.data_ptr(), sums.data_ptr(), suffix.data_ptr(), blocks, threads)
            wrong[variant, name] = int((sums != want_sums).sum() + (suffix != want_suffix).sum())
    assert all(wrong["intact", name] == 0 for name, _, _ in orders), wrong
    assert wrong["patched", "forward"] == 0, wrong  # the blind spot of a single fixed order
    caught = [name for name, mode, _ in orders if mode == 2 and wrong["patched", name] > 0]
    assert len(caught) >= 3, wrong


# ---- GPU: every kernel against its reference ----------------------------------------------------------------------

SIZES_N, SIZES_K, SIZES_V = (1, 7, 64, 256), (2, 8, 16), (1000, 151936, 262144)


def _gpu_logits(n, k, vocab, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(n, k, vocab, device="cuda", generator=g) * 3).to(dtype)


def _gpu_accept_case(n, k, vocab, dtype, seed, **sampling):
    """_accept_inputs on the GPU with fresh GPU logits (big sizes are too slow to make on the CPU)."""
    args = list(_accept_inputs(n, k, 2, seed=seed, **sampling))
    logits = _gpu_logits(n, k, vocab, dtype, seed)
    greedy = logits.argmax(-1).cpu()
    g = torch.Generator().manual_seed(seed)
    cut = torch.randint(0, k, (n,), generator=g)
    drafts = greedy[:, :-1].clone()
    rows = torch.arange(n)[cut < k - 1]
    drafts[rows, cut[rows]] = (drafts[rows, cut[rows]] + 1) % vocab
    stop_ids = torch.full((n, 3), -1, dtype=torch.long)
    stop_rows = torch.rand(n, generator=g) < 0.3
    stop_ids[stop_rows, 1] = greedy[stop_rows, torch.randint(0, k, (int(stop_rows.sum()),), generator=g)]
    args[0], args[1], args[7] = logits, drafts, stop_ids
    return tuple(a.cuda() for a in args)


@gpu
def test_gpu_device_is_supported(use_lib):
    K.check_device(torch.device("cuda"))
    assert K.available()


@gpu
@pytest.mark.parametrize("vocab", SIZES_V)
@pytest.mark.parametrize("k", SIZES_K)
@pytest.mark.parametrize("n", SIZES_N)
def test_gpu_sample_accept_greedy_exact(use_lib, n, k, vocab):
    for i, dtype in enumerate(DTYPES):
        args = _gpu_accept_case(n, k, vocab, dtype, seed=1000 * n + 10 * k + i)
        got = K.sample_accept(*args)
        _assert_accept_equal(got, sa_ref.sample_accept(*args))
        assert 0 < int(got.accepted.max() + 1) <= k
    if n >= 64:  # the ragged acceptance and stop tokens actually happen
        assert len(set(got.accepted.tolist())) > 1 and bool(got.finished.any())


def _check_sampled(args, min_agreement=0.999):
    got, want = K.sample_accept(*args), sa_ref.sample_accept(*args)
    agree = (got.target_tokens == want.target_tokens).float().mean().item()
    assert agree >= min_agreement, agree  # identical but for ulp differences of logf
    # acceptance from the kernel's own tokens follows the reference rule exactly
    redo = sa_ref.accept_tokens(got.target_tokens, args[1], *args[7:])
    _assert_accept_equal(got, redo)
    return got, want


@gpu
@pytest.mark.parametrize("vocab", SIZES_V)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("filt", ["none", "top_k", "top_p", "both", "mixed"])
def test_gpu_sample_accept_sampled_matches_reference(use_lib, vocab, dtype, filt):
    n, k = (7, 8) if vocab > 1000 else (64, 16)
    g = torch.Generator().manual_seed(vocab + len(filt))
    temperature = torch.rand(n, generator=g) + 0.3
    top_k = torch.zeros(n, dtype=torch.long)
    top_p = torch.ones(n)
    if filt in ("top_k", "both", "mixed"):
        top_k = torch.randint(1, 2000, (n,), generator=g)
    if filt in ("top_p", "both", "mixed"):
        top_p = torch.rand(n, generator=g) * 0.9 + 0.05
    if filt == "mixed":  # greedy, filtered and unfiltered rows in one batch
        temperature[::3] = 0.0
        top_k[1::3] = 0
        top_p[2::3] = 1.0
    args = _gpu_accept_case(n, k, vocab, dtype, seed=vocab, temperature=temperature, top_k=top_k, top_p=top_p)
    _check_sampled(args)


@gpu
def test_gpu_sampling_ties_at_the_cuts(use_lib):
    """Integer-valued logits: many exact ties at the top-k and top-p thresholds (ties must be kept)."""
    n, k, vocab = 64, 8, 5000
    g = torch.Generator().manual_seed(3)
    logits = (torch.randint(-8, 8, (n, k, vocab), generator=g).float() * 0.5).cuda()
    for top_k, top_p in ((3, 1.0), (50, 1.0), (0, 0.3), (0, 0.9), (200, 0.6)):
        args = list(_gpu_accept_case(n, k, vocab, torch.float32, seed=top_k, temperature=0.9, top_k=top_k, top_p=top_p))
        args[0] = logits
        _check_sampled(tuple(args))


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_sampling_distribution(use_lib, dtype):
    """Many independent positions of one row: empirical frequencies match the filtered softmax."""
    vocab, rows = 64, 200_000
    base = torch.randn(vocab, generator=torch.Generator().manual_seed(5)) * 2
    for temperature, top_k, top_p in ((1.0, 0, 1.0), (0.7, 10, 1.0), (1.3, 0, 0.8), (1.0, 20, 0.7)):
        logits = base.to(dtype).cuda().expand(rows, 1, vocab)
        t = torch.full((rows,), temperature, device="cuda")
        tk = torch.full((rows,), top_k, device="cuda")
        tp = torch.full((rows,), top_p, device="cuda")
        keys = seed_keys(torch.full((rows,), 1234, device="cuda"))
        positions = torch.arange(rows, device="cuda")[:, None]
        args = (logits, torch.empty(rows, 0, dtype=torch.long, device="cuda"), t, tk, tp, keys, positions,
                torch.full((rows, 1), -1, device="cuda"), torch.full((rows,), 10, device="cuda"))
        got, want = _check_sampled(args)
        probs = filtered_scores(base.to(dtype)[None, None].float().cuda(), t[:1], tk[:1], tp[:1]).softmax(-1)[0, 0]
        freq = torch.bincount(got.target_tokens[:, 0], minlength=vocab).double() / rows
        tv = 0.5 * (freq - probs.double()).abs().sum().item()
        assert tv < 0.02, (temperature, top_k, top_p, tv)  # sampling noise alone is ~0.007


@gpu
def test_gpu_sampling_is_reproducible_and_batch_independent(use_lib):
    n, k, vocab = 16, 8, 151936
    args = _gpu_accept_case(n, k, vocab, torch.bfloat16, seed=7, temperature=1.0, top_k=100, top_p=0.9)
    first, second = K.sample_accept(*args), K.sample_accept(*args)
    _assert_accept_equal(first, second)
    # a row's tokens depend only on its logits, key and positions, not on the rest of the batch
    sub = tuple(a[3:5] for a in args)
    assert torch.equal(K.sample_accept(*sub).target_tokens, first.target_tokens[3:5])
    other = list(args)
    other[5] = seed_keys(torch.arange(100, 100 + n, device="cuda"))
    assert not torch.equal(K.sample_accept(*other).target_tokens, first.target_tokens)


@gpu
def test_gpu_sample_accept_strided_logits_and_stream(use_lib):
    n, k, vocab = 8, 8, 32000
    full = _gpu_logits(n, k + 4, vocab, torch.bfloat16, seed=2)
    logits = full[:, 2:2 + k]  # a view: strides (k+4)*V, V, 1
    args = list(_gpu_accept_case(n, k, vocab, torch.bfloat16, seed=2, temperature=0.8, top_p=0.9))
    args[0] = logits
    want = sa_ref.sample_accept(*args)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        got = K.sample_accept(*args)
    stream.synchronize()
    assert (got.target_tokens == want.target_tokens).float().mean() >= 0.99


@gpu
def test_gpu_sample_accept_in_cuda_graph(use_lib):
    args = _gpu_accept_case(16, 8, 151936, torch.bfloat16, seed=4, temperature=0.0)
    K.sample_accept(*args)  # load + warm up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = K.sample_accept(*args)
    graph.replay()
    torch.cuda.synchronize()
    _assert_accept_equal(out, sa_ref.sample_accept(*args))


@gpu
@pytest.mark.parametrize("n", SIZES_N)
def test_gpu_prepare_block(use_lib, n):
    last = torch.randint(0, 150000, (n,), device="cuda")
    starts = torch.randint(0, 30000, (n,), device="cuda")
    for b in (1, 2, 16):
        got, want = K.prepare_block(last, starts, 151669, b), block_ref.prepare_block(last, starts, 151669, b)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@gpu
@pytest.mark.parametrize("vocab", SIZES_V)
@pytest.mark.parametrize("k", SIZES_K + (1,))
@pytest.mark.parametrize("n", SIZES_N)
def test_gpu_drafts_to_verify(use_lib, n, k, vocab):
    last = torch.randint(0, vocab, (n,), device="cuda")
    starts = torch.randint(0, 30000, (n,), device="cuda")
    for i, dtype in enumerate(DTYPES):
        hidden_like = _gpu_logits(n, k + 1, vocab, dtype, seed=n + k + i)
        logits = hidden_like[:, 1:k]  # slots 1..k-1 of a block: a strided view, as the engine slices it
        got = K.drafts_to_verify(last, logits, starts)
        want = block_ref.drafts_to_verify(last, logits, starts)
        for a, b in zip(got, want):
            assert torch.equal(a, b)


@gpu
@pytest.mark.parametrize("dtype,feat", [(torch.float32, 4096), (torch.bfloat16, 3 * 2560), (torch.float16, 5),
                                        (torch.bfloat16, 12288)])
@pytest.mark.parametrize("n,k", [(1, 2), (7, 8), (64, 16), (256, 16)])
def test_gpu_commit_step(use_lib, dtype, feat, n, k):
    max_slots = n + 3
    state = _commit_inputs(n, k, feat, max_slots, dtype, "cuda", seed=n * k)
    ref = tuple(t.clone() for t in state)
    K.commit_step(*state)
    book_ref.commit_step(*ref)
    for a, b in zip(state, ref):
        assert torch.equal(a, b)
    ar = _commit_inputs(n, k, feat, max_slots, dtype, "cuda", seed=1)
    got_tl, want_tl = ar[3].clone(), ar[3].clone()
    K.commit_step(ar[0], ar[1], ar[2], got_tl)
    book_ref.commit_step(ar[0], ar[1], ar[2], want_tl)
    assert torch.equal(got_tl, want_tl)


@gpu
@pytest.mark.parametrize("num_nodes,block_size", [(2, 16), (16, 16), (64, 16), (64, 64)])
@pytest.mark.parametrize("n", SIZES_N)
def test_gpu_tree_accept(use_lib, n, num_nodes, block_size):
    *args, width = _tree_case(num_nodes, block_size, seed=n + num_nodes)
    reps = -(-n // args[0].shape[0])  # repeat the case's rows up to n
    args = [a.repeat((reps,) + (1,) * (a.dim() - 1))[:n].cuda() for a in args]
    path, got = K.tree_accept(*args, width)
    want_path, want = tree_ref.tree_accept(*args, width)
    assert torch.equal(path, want_path)
    _assert_accept_equal(got, want)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,width", [(1, 16), (7, 16), (64, 16), (256, 16), (64, 64)])
def test_gpu_compact_kv(use_lib, dtype, n, width):
    """A Qwen3-8B-like cache slice (8 KV heads x 128) of 4 layers; paths over trees of 64 nodes."""
    k, v, slots, starts, path = _kv_case(4, n + 3, 96, 8, 128, dtype, n, width, 64, seed=n + width, device="cuda")
    want_k, want_v = k.clone(), v.clone()
    K.compact_kv(k, v, slots, starts, path)
    tree_ref.compact_kv(want_k, want_v, slots, starts, path)
    assert torch.equal(_bits(k), _bits(want_k)) and torch.equal(_bits(v), _bits(want_v))


@gpu
def test_gpu_tree_ops_in_cuda_graph(use_lib):
    *args, width = _tree_case(64, 16, seed=5, device="cuda")
    n = args[0].shape[0]
    k, v, slots, starts, _ = _kv_case(4, n + 2, 128, 8, 128, torch.bfloat16, n, width, 64, seed=5, device="cuda")
    want_k, want_v = k.clone(), v.clone()
    want_path, want = tree_ref.tree_accept(*args, width)
    tree_ref.compact_kv(want_k, want_v, slots, starts, want_path)
    K.tree_accept(*args, width)  # load + warm up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        path, res = K.tree_accept(*args, width)
        K.compact_kv(k, v, slots, starts, path)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(path, want_path)
    _assert_accept_equal(res, want)
    assert torch.equal(_bits(k), _bits(want_k)) and torch.equal(_bits(v), _bits(want_v))
