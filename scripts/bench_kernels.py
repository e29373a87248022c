#!/usr/bin/env python
"""Benchmark the CUDA plugin kernels against the torch op sequences they replace.

For every size: the kernel's GPU time (CUDA-graph replays, so launch overhead is not counted), its eager per-call time
(what a Python caller pays, ctypes included), the torch reference's per-call time (the op sequence the engine runs
today, host syncs included), and for sample-and-accept the logits-read floor N*K*V*bytes / HBM bandwidth, with the
HBM bandwidth measured on this GPU by a device-to-device copy; then the draft-tree ops (tree acceptance, K/V
compaction of the accepted path). Prints a table; --json writes the rows.

    python scripts/bench_kernels.py [--quick] [--json results.json] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dflash_trt.kernels import block_draft as block_ref  # noqa: E402
from dflash_trt.kernels import bookkeeping as book_ref  # noqa: E402
from dflash_trt.kernels import cuda as K  # noqa: E402
from dflash_trt.kernels import sample_accept as sa_ref  # noqa: E402
from dflash_trt.kernels import tree_accept as tree_ref  # noqa: E402
from dflash_trt.spec.sampling import seed_keys  # noqa: E402
from dflash_trt.spec.tree import build_tree, max_depth  # noqa: E402

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def hbm_bandwidth(gib: float = 2.0, iters: int = 20) -> float:
    """Bytes/s of a device-to-device copy (read + write counted)."""
    n = int(gib * (1 << 30)) // 4
    src = torch.empty(n, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        dst.copy_(src)
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / iters
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n * 4 / seconds


def graph_time(fn, iters: int = 50) -> float | None:
    """Seconds per call of fn's GPU work, replayed from a CUDA graph; None if fn cannot be captured."""
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(10):
                fn()
        graph.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        reps = max(1, iters // 10)
        start.record()
        for _ in range(reps):
            graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / (reps * 10)
    except Exception as err:  # noqa: BLE001 - report, fall back to eager timing
        print(f"  (graph capture failed: {type(err).__name__}: {err})", file=sys.stderr)
        torch.cuda.synchronize()
        return None


def eager_time(fn, iters: int = 20) -> float:
    """Wall seconds per call, synchronised (what a caller waits)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters


def accept_case(n, k, vocab, dtype, mode):
    g = torch.Generator(device="cuda").manual_seed(0)
    logits = (torch.randn(n, k, vocab, device="cuda", generator=g) * 3).to(dtype)
    drafts = logits[:, :-1].argmax(-1)
    t = {"greedy": 0.0}.get(mode, 1.0)
    top_k = {"top_k": 50, "top_k+top_p": 50}.get(mode, 0)
    top_p = {"top_p": 0.9, "top_k+top_p": 0.9}.get(mode, 1.0)
    dev = "cuda"
    return (logits, drafts, torch.full((n,), t, device=dev), torch.full((n,), top_k, device=dev),
            torch.full((n,), top_p, device=dev), seed_keys(torch.arange(n, device=dev)),
            torch.arange(n * k, device=dev).reshape(n, k) + 100, torch.full((n, 2), -1, device=dev),
            torch.full((n,), 1000, device=dev))


def fmt_us(s):
    return "-" if s is None else f"{s * 1e6:9.1f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes")
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_kernels.py: no CUDA device", file=sys.stderr)
        return 2
    K.check_device(torch.device("cuda"))
    dtype = DTYPES[args.dtype]
    elem = torch.tensor([], dtype=dtype).element_size()
    bw = hbm_bandwidth()
    name = torch.cuda.get_device_name()
    print(f"{name}, library {K.library_path()} ({','.join(K.compiled_archs())}), measured HBM copy bandwidth "
          f"{bw / 1e9:.0f} GB/s, logits {args.dtype}")
    rows = []

    sizes = [(1, 16, 151936), (8, 16, 151936), (64, 16, 151936), (256, 16, 151936), (64, 8, 262144)]
    modes = ["greedy", "sampled", "top_k", "top_p", "top_k+top_p"]
    if args.quick:
        sizes, modes = sizes[:3], ["greedy", "sampled", "top_p"]
    print("\nsample_accept: kernel (graph) / kernel eager / torch reference eager; floor = N*K*V*bytes / HBM bw")
    print(f"{'N':>4} {'K':>3} {'V':>7} {'mode':>12} {'kernel us':>10} {'eager us':>9} {'torch us':>10} {'speedup':>8} "
          f"{'floor us':>9} {'GB/s':>7} {'of floor':>8}")
    for n, k, vocab in sizes:
        for mode in modes:
            case = accept_case(n, k, vocab, dtype, mode)
            kern = graph_time(lambda: K.sample_accept(*case))
            eager = eager_time(lambda: K.sample_accept(*case))
            ref_iters = 3 if mode in ("top_p", "top_k+top_p") and n * k * vocab > 5e7 else 10
            ref = eager_time(lambda: sa_ref.sample_accept(*case), iters=ref_iters)
            nbytes = n * k * vocab * elem
            floor = nbytes / bw
            t = kern if kern is not None else eager
            row = dict(op="sample_accept", n=n, k=k, vocab=vocab, mode=mode, dtype=args.dtype, kernel_s=kern,
                       eager_s=eager, torch_s=ref, floor_s=floor, achieved_GBps=nbytes / t / 1e9,
                       fraction_of_floor=floor / t)
            rows.append(row)
            print(f"{n:4d} {k:3d} {vocab:7d} {mode:>12} {fmt_us(kern):>10} {fmt_us(eager):>9} {fmt_us(ref):>10} "
                  f"{ref / t:7.1f}x {fmt_us(floor):>9} {nbytes / t / 1e9:7.0f} {floor / t:7.0%}")
            del case
            torch.cuda.empty_cache()

    print("\ndrafts_to_verify (argmax of the drafter's logits -> verify ids + positions) and prepare_block")
    print(f"{'N':>4} {'K':>3} {'V':>7} {'op':>16} {'kernel us':>10} {'eager us':>9} {'torch us':>10} {'speedup':>8} "
          f"{'floor us':>9}")
    for n, k, vocab in sizes[:4]:
        logits = (torch.randn(n, k - 1, vocab, device="cuda") * 3).to(dtype)
        last = torch.randint(0, vocab, (n,), device="cuda")
        starts = torch.randint(0, 4000, (n,), device="cuda")
        for op, fn, ref_fn, nbytes in (
            ("drafts_to_verify", lambda: K.drafts_to_verify(last, logits, starts),
             lambda: block_ref.drafts_to_verify(last, logits, starts), n * (k - 1) * vocab * elem),
            ("prepare_block", lambda: K.prepare_block(last, starts, vocab - 1, 16),
             lambda: block_ref.prepare_block(last, starts, vocab - 1, 16), 0),
        ):
            kern, eager, ref = graph_time(fn), eager_time(fn), eager_time(ref_fn)
            t = kern if kern is not None else eager
            rows.append(dict(op=op, n=n, k=k, vocab=vocab, dtype=args.dtype, kernel_s=kern, eager_s=eager, torch_s=ref,
                             floor_s=nbytes / bw))
            print(f"{n:4d} {k:3d} {vocab:7d} {op:>16} {fmt_us(kern):>10} {fmt_us(eager):>9} {fmt_us(ref):>10} "
                  f"{ref / t:7.1f}x {fmt_us(nbytes / bw) if nbytes else '-':>9}")

    print("\ncommit_step (context copy + lengths + bonus token) vs the reference's index_put sequence")
    print(f"{'N':>4} {'K':>3} {'F':>6} {'kernel us':>10} {'eager us':>9} {'torch us':>10} {'speedup':>8}")
    for n, k, feat in ((1, 16, 3 * 4096), (8, 16, 3 * 4096), (64, 16, 3 * 4096), (256, 16, 3 * 5120)):
        slots = torch.randperm(n, device="cuda")
        accepted = torch.randint(0, k, (n,), device="cuda")
        starts = torch.randint(10, 1000, (n,), device="cuda")
        tl = torch.zeros(n, dtype=torch.long, device="cuda")
        features = torch.randn(n, k, feat, device="cuda").to(dtype)
        context = torch.zeros(n, k, feat, device="cuda", dtype=dtype)
        counts = torch.ones(n, dtype=torch.long, device="cuda")
        dl = torch.zeros(n, dtype=torch.long, device="cuda")
        tokens = torch.randint(0, 1000, (n, k), device="cuda")
        last = torch.zeros(n, dtype=torch.long, device="cuda")
        state = (accepted, slots, starts, tl, features, context, counts, dl, tokens, last)
        kern = graph_time(lambda: K.commit_step(*state))
        eager = eager_time(lambda: K.commit_step(*state))
        ref = eager_time(lambda: book_ref.commit_step(*state))
        t = kern if kern is not None else eager
        rows.append(dict(op="commit_step", n=n, k=k, feat=feat, dtype=args.dtype, kernel_s=kern, eager_s=eager,
                         torch_s=ref))
        print(f"{n:4d} {k:3d} {feat:6d} {fmt_us(kern):>10} {fmt_us(eager):>9} {fmt_us(ref):>10} {ref / t:7.1f}x")

    print("\ntree_accept (64-node trees of a 16-slot block: W = 16) and compact_kv (Qwen3-8B cache: 36 layers x 8 KV "
          f"heads x 128, {args.dtype}) vs the torch references")
    print(f"{'N':>4} {'op':>12} {'kernel us':>10} {'eager us':>9} {'torch us':>10} {'speedup':>8}")
    nodes, block, capacity = 64, 16, 512 + 64
    width = max_depth(nodes, block) + 1
    for n in (1, 64) if args.quick else (1, 8, 64, 256):
        root = torch.randint(0, 1000, (n,), device="cuda")
        tree = build_tree(torch.randn(n, width - 1, 1000, device="cuda") * 3, root, nodes)
        target = torch.randint(0, 1000, (n, nodes), device="cuda")
        target.scatter_(1, tree.parents[:, 1:].flip(1), tree.tokens[:, 1:].flip(1))  # some child of every node matches
        stop_ids = torch.full((n, 2), -1, device="cuda")
        remaining = torch.full((n,), 1000, device="cuda")
        tree_args = (tree.tokens, tree.parents, tree.depth, target, stop_ids, remaining, width)
        path, res = tree_ref.tree_accept(*tree_args)
        k = torch.randn(36, n, capacity, 8, 128, device="cuda", dtype=dtype)
        v = torch.randn_like(k)
        slots = torch.randperm(n, device="cuda")
        starts = torch.randint(0, capacity - nodes, (n,), device="cuda")
        for op, fn, ref_fn in (
            ("tree_accept", lambda: K.tree_accept(*tree_args), lambda: tree_ref.tree_accept(*tree_args)),
            ("compact_kv", lambda: K.compact_kv(k, v, slots, starts, path),
             lambda: tree_ref.compact_kv(k, v, slots, starts, path)),
        ):
            kern, eager, ref = graph_time(fn), eager_time(fn), eager_time(ref_fn)
            t = kern if kern is not None else eager
            rows.append(dict(op=op, n=n, nodes=nodes, width=width, dtype=args.dtype, kernel_s=kern, eager_s=eager,
                             torch_s=ref, mean_accepted=float(res.accepted.float().mean())))
            print(f"{n:4d} {op:>12} {fmt_us(kern):>10} {fmt_us(eager):>9} {fmt_us(ref):>10} {ref / t:7.1f}x")
        del k, v
        torch.cuda.empty_cache()

    if args.json:
        meta = dict(gpu=name, hbm_copy_GBps=bw / 1e9, torch=torch.__version__, cuda=torch.version.cuda,
                    library=str(K.library_path()), archs=K.compiled_archs(), host=platform.node(),
                    date=time.strftime("%Y-%m-%dT%H:%M:%S"))
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
