#!/usr/bin/env python
"""Benchmark the Triton-served model: requests/s, TTFT, TPOT and tokens/s at several client concurrencies, AR vs DFlash.

One tritonserver serves two models from one repository: `dflash` (speculative) and `ar` (the same engine, drafter
off). Each concurrency level runs the same prompts through both (AR first), every client a gRPC stream sending
streaming requests back to back. Greedy, so the two modes must emit the same tokens; the script checks it.

    python scripts/bench_triton.py [--target DIR --drafter DIR] [--dataset data/prompts/eagle_gsm8k.jsonl]
        [--num-prompts 32] [--max-tokens 64] [--concurrency 1,4,16] [--max-batch-size 16] [--torch-threads 1]
        [--device cpu] [--output bench/results/DATE-cpu-triton]

Metrics per (mode, concurrency): requests/s = requests / wall time; tokens/s = generated tokens / wall time;
TTFT = send -> first token (mean, p50, p90); TPOT = (latency - TTFT) / (tokens - 1) per request, averaged.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dflash_trt.bench.datasets import encode_prompt, load_prompt_set  # noqa: E402
from dflash_trt.bench.metrics import percentile  # noqa: E402
from dflash_trt.checkpoint import load_tokenizer  # noqa: E402
from dflash_trt.serve.triton.client import GrpcStream  # noqa: E402
from dflash_trt.serve.triton.repository import write_model_repository  # noqa: E402
from dflash_trt.serve.triton.server import TritonServer  # noqa: E402


def run_level(url: str, model: str, prompts: list[list[int]], concurrency: int, max_tokens: int) -> dict:
    results: list = [None] * len(prompts)
    errors: list = []
    next_index = iter(range(len(prompts)))
    lock = threading.Lock()

    def worker():
        stream = GrpcStream(url, model=model)
        try:
            while True:
                with lock:
                    i = next(next_index, None)
                if i is None:
                    return
                results[i] = stream.generate(prompts[i], streaming=True, max_tokens=max_tokens, timeout=600)
        except BaseException as err:  # noqa: BLE001
            errors.append(err)
        finally:
            stream.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{model} c={concurrency}: {errors[0]}")
    tokens = sum(len(r.token_ids) for r in results)
    ttft = [r.ttft_s for r in results]
    tpot = [(r.latency_s - r.ttft_s) / (len(r.token_ids) - 1) for r in results if len(r.token_ids) > 1]
    taus = [r.stats.get("mean_tau", 0.0) for r in results]
    steps = [(len(r.token_ids) - 1) / t for r, t in zip(results, taus) if t > 0]
    return {
        "model": model, "concurrency": concurrency, "requests": len(results), "wall_s": wall,
        "requests_per_s": len(results) / wall, "tokens": tokens, "tokens_per_s": tokens / wall,
        "ttft_mean_ms": 1000 * statistics.mean(ttft), "ttft_p50_ms": 1000 * percentile(ttft, 0.5),
        "ttft_p90_ms": 1000 * percentile(ttft, 0.9), "tpot_mean_ms": 1000 * statistics.mean(tpot) if tpot else None,
        "tpot_p50_ms": 1000 * percentile(tpot, 0.5) if tpot else None,
        "mean_tau": (sum(len(r.token_ids) - 1 for r in results) / sum(steps)) if steps and model != "ar" else None,
        "max_batch_size_seen": max(r.stats.get("batch_size", 0) for r in results),
        "_outputs": [r.token_ids for r in results],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=str(ROOT / "tests/fixtures/gsm8k-tiny/target"))
    ap.add_argument("--drafter", default=str(ROOT / "tests/fixtures/gsm8k-tiny/drafter"))
    ap.add_argument("--dataset", default=str(ROOT / "data/prompts/eagle_gsm8k.jsonl"))
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--max-batch-size", type=int, default=16)
    ap.add_argument("--max-seq-len", type=int, default=512)
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--output", default=None, help="directory for results.json (default: print only)")
    args = ap.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]

    tokenizer = load_tokenizer(args.target)
    turns = load_prompt_set(args.dataset, args.num_prompts).turns
    prompts = [encode_prompt(tokenizer, t, args.max_seq_len - args.max_tokens)[0] for t in turns]

    with tempfile.TemporaryDirectory(prefix="bench-triton-") as tmp:
        repo = Path(tmp) / "repo"
        common = dict(target=args.target, max_batch_size=args.max_batch_size, max_seq_len=args.max_seq_len,
                      device=args.device, dtype=args.dtype, torch_num_threads=args.torch_threads)
        write_model_repository(repo, drafter=args.drafter, model_name="dflash", **common)
        write_model_repository(repo, drafter=None, model_name="ar", speculative=False, **common)
        server = TritonServer(repo, log_path=Path(tmp) / "server.log")
        print(f"starting tritonserver ({server.install.binary})", file=sys.stderr)
        server.start(timeout=600)
        try:
            for model in ("ar", "dflash"):  # warmup
                run_level(server.grpc_url, model, prompts[:2], 2, 8)
            rows = []
            for c in levels:
                for model in ("ar", "dflash"):
                    row = run_level(server.grpc_url, model, prompts, c, args.max_tokens)
                    rows.append(row)
                    print(f"{model:6s} c={c:<3d} req/s={row['requests_per_s']:.2f} tok/s={row['tokens_per_s']:.1f} "
                          f"TTFT={row['ttft_mean_ms']:.0f}ms (p50 {row['ttft_p50_ms']:.0f}) "
                          f"TPOT={row['tpot_mean_ms']:.1f}ms batch<={row['max_batch_size_seen']}", file=sys.stderr)
        finally:
            server.stop()

    for c in levels:
        ar, sp = (next(r for r in rows if r["model"] == m and r["concurrency"] == c) for m in ("ar", "dflash"))
        sp["outputs_equal_ar"] = ar["_outputs"] == sp["_outputs"]
        sp["speedup_tokens_per_s"] = sp["tokens_per_s"] / ar["tokens_per_s"]
        sp["speedup_tpot"] = ar["tpot_mean_ms"] / sp["tpot_mean_ms"]
    for r in rows:
        r.pop("_outputs")
    report = {
        "benchmark": "scripts/bench_triton.py", "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "config": {k: (os.path.relpath(v, ROOT) if isinstance(v, str) and v.startswith(str(ROOT)) else v)
                   for k, v in vars(args).items() if k != "output"},
        "prompts": {"dataset": os.path.relpath(args.dataset, ROOT), "count": len(prompts),
                    "prompt_tokens_mean": statistics.mean(len(p) for p in prompts)},
        "results": rows,
    }
    print("\n| concurrency | mode | req/s | tok/s | TTFT mean (ms) | TPOT mean (ms) | mean τ | outputs = AR |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        tau = f"{r['mean_tau']:.2f}" if r["mean_tau"] else "-"
        same = "" if r["model"] == "ar" else ("yes" if r["outputs_equal_ar"] else "NO")
        print(f"| {r['concurrency']} | {r['model']} | {r['requests_per_s']:.2f} | {r['tokens_per_s']:.1f} | "
              f"{r['ttft_mean_ms']:.0f} | {r['tpot_mean_ms']:.1f} | {tau} | {same} |")
    if args.output:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {out / 'results.json'}", file=sys.stderr)
    return 0 if all(r.get("outputs_equal_ar", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
