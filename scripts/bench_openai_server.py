#!/usr/bin/env python
"""Benchmark `dflash-trt serve --api openai`: AR vs DFlash draft budgets through the official `openai` client.

Starts one server per mode on loopback (the same target: `--no-draft` for AR; with the drafter and `--draft MODE` for
each other mode, e.g. chain:16 and auto), then for each client concurrency runs the same prompts through every mode,
`--rounds` times, the modes' order rotating per round (interleaved per level, so a drifting machine load hits all
alike; an idle server sleeps on its queue and takes no CPU); a level's numbers sum its rounds, and every round's texts
are checked; before the first level every server runs `--warmup-rounds` rounds at the highest concurrency, not
measured (its graph captures, auto's first exploration and cost learning). Every client is an asyncio task sending
streaming `/v1/chat/completions` requests back to back (greedy, `stream_options.include_usage`); the server applies
the target's chat template. Greedy, so DFlash must emit AR's text exactly: the script checks it.

    python scripts/bench_openai_server.py [--target DIR --drafter DIR | --engine-dir DIR]
        [--dataset data/prompts/eagle_gsm8k.jsonl]
        [--num-prompts 16] [--max-tokens 64] [--concurrency 1,4,16] [--max-batch-size 16] [--max-seq-len 512]
        [--torch-threads 1] [--device cpu] [--dtype float32] [--modes ar,dflash | ar,chain:16,auto] [--rounds 1]
        [--warmup-rounds 1]
        [--output bench/results/DATE-cpu-openai-server]

Writes results.json, a README.md table and pareto.png: total tok/s against per-user tok/s, one curve per mode over the
concurrency levels, and the "throughput at fixed interactivity" ratio: each mode's total tok/s, interpolated along its
curve, at the per-user rate AR reaches at the reference concurrency (`--reference-concurrency`, default 4), over AR's
(a lower bound, ">=", for a curve that stays above that rate at every level).

Per (mode, concurrency):
  total tok/s     generated tokens of all requests / wall time of the level
  per-user tok/s  mean over requests of (tokens - 1) / (latency - TTFT): the decode speed one client sees
  TTFT            request sent -> first content chunk (mean, p50); latency: request sent -> [DONE]
  mean tau        from the server's /metrics (dflash_acceptance_length sum / count over the level)
  steps by draft  from the server's /metrics (dflash_draft_steps_total over the level): what auto chose there
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dflash_trt.bench.datasets import load_prompt_set  # noqa: E402
from dflash_trt.bench.metrics import percentile  # noqa: E402
from dflash_trt.manifest import load_manifest  # noqa: E402
from dflash_trt.spec.stats import draft_steps_text  # noqa: E402
from dflash_trt.serve.triton.server import free_port  # noqa: E402


PAIR_RUNTIME = {"device": "cpu", "dtype": "float32"}  # a pair's servers' device and dtype unless given


def server_command(mode: str, args, port: int) -> list[str]:
    """`dflash-trt serve --api openai` for one mode: AR (--no-draft), the default draft ("dflash") or a --draft value;
    from --target / --drafter, or from --engine-dir (its manifest's runtime, drafter, and auto's measured prior, with
    --device / --dtype only where given)."""
    cmd = [sys.executable, "-m", "dflash_trt", "serve", "--api", "openai", "--host", "127.0.0.1", "--port", str(port),
           "--torch-threads", str(args.torch_threads), "--max-batch-size", str(args.max_batch_size),
           "--max-seq-len", str(args.max_seq_len), "--served-model-name", "bench"]
    if args.engine_dir:
        cmd += ["--engine-dir", args.engine_dir] + (["--no-draft"] if mode == "ar" else [])
        cmd += [a for flag, v in (("--device", args.device), ("--dtype", args.dtype)) if v for a in (flag, v)]
    else:
        cmd += ["--target", args.target, "--device", args.device or PAIR_RUNTIME["device"],
                "--dtype", args.dtype or PAIR_RUNTIME["dtype"]]
        cmd += ["--no-draft"] if mode == "ar" else ["--drafter", args.drafter]
    if args.verify_len and mode != "ar":
        cmd += ["--verify-len", str(args.verify_len)]
    if mode not in ("ar", "dflash"):
        cmd += ["--draft", mode]
    return cmd


class Server:
    def __init__(self, mode: str, args, log_dir: Path):
        self.mode, self.port = mode, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log_dir / f"server-{mode.replace(':', '')}.log"
        cmd = server_command(mode, args, self.port)
        env = dict(os.environ, OMP_NUM_THREADS=str(max(1, args.torch_threads)))
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)

    def wait_ready(self, timeout: float = 300.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.mode} server exited ({self.proc.returncode}):\n{self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"{self.mode} server not healthy after {timeout} s")

    def metrics(self) -> dict[str, float]:
        import httpx
        from prometheus_client.parser import text_string_to_metric_families

        out = {}
        for family in text_string_to_metric_families(httpx.get(self.url + "/metrics", timeout=10).text):
            for s in family.samples:
                if not s.labels:
                    out[s.name] = s.value
                elif s.name == "dflash_draft_steps_total":  # steps by draft: what auto chose
                    out["draft_steps:" + s.labels["draft"]] = s.value
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(2)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def run_level(url: str, turns: list[str], concurrency: int, max_tokens: int) -> tuple[float, list[dict]]:
    import openai

    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600)
    results: list[dict | None] = [None] * len(turns)
    next_index = iter(range(len(turns)))

    async def one(i: int) -> dict:
        t0 = time.perf_counter()
        ttft = None
        text, usage, reason = [], None, None
        stream = await client.chat.completions.create(
            model="bench", messages=[{"role": "user", "content": turns[i]}], max_tokens=max_tokens, temperature=0,
            stream=True, stream_options={"include_usage": True})
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                if choice.delta.content:
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                    text.append(choice.delta.content)
                reason = choice.finish_reason or reason
        latency = time.perf_counter() - t0
        return {"text": "".join(text), "tokens": usage.completion_tokens, "ttft_s": ttft if ttft is not None else latency,
                "latency_s": latency, "finish_reason": reason}

    async def worker():
        for i in next_index:
            results[i] = await one(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - t0
    await client.close()
    return wall, results  # type: ignore[return-value]


def summarize(mode: str, concurrency: int, wall: float, results: list[dict], tau: float | None) -> dict:
    tokens = sum(r["tokens"] for r in results)
    ttft = [r["ttft_s"] for r in results]
    per_user = [(r["tokens"] - 1) / (r["latency_s"] - r["ttft_s"]) for r in results
                if r["tokens"] > 1 and r["latency_s"] > r["ttft_s"]]
    return {"mode": mode, "concurrency": concurrency, "requests": len(results), "wall_s": wall, "tokens": tokens,
            "total_tokens_per_s": tokens / wall, "per_user_tokens_per_s": statistics.mean(per_user) if per_user else None,
            "ttft_mean_ms": 1000 * statistics.mean(ttft), "ttft_p50_ms": 1000 * percentile(ttft, 0.5),
            "latency_mean_s": statistics.mean(r["latency_s"] for r in results), "mean_tau": tau}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=str(ROOT / "tests/fixtures/gsm8k-tiny/target"))
    ap.add_argument("--drafter", default=str(ROOT / "tests/fixtures/gsm8k-tiny/drafter"))
    ap.add_argument("--dataset", default=str(ROOT / "data/prompts/eagle_gsm8k.jsonl"))
    ap.add_argument("--num-prompts", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--max-batch-size", type=int, default=16)
    ap.add_argument("--max-seq-len", type=int, default=512)
    ap.add_argument("--verify-len", type=int, default=None)
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--engine-dir", default=None,
                    help="serve a built engine directory instead of --target / --drafter (AR: the same directory with "
                         "--no-draft); auto then starts from the build's measured acceptance curve")
    ap.add_argument("--device", default=None, help="default cpu (with --engine-dir: the manifest's)")
    ap.add_argument("--dtype", default=None, help="default float32 (with --engine-dir: the manifest's)")
    ap.add_argument("--modes", default="ar,dflash",
                    help="comma-separated: ar (--no-draft), dflash (the default draft) or any --draft value")
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs of the prompts per mode and level, the modes' order rotating per round (summed)")
    ap.add_argument("--warmup-rounds", type=int, default=1,
                    help="rounds of the prompts through every server at the highest concurrency before measuring (not "
                         "measured): a server's first requests capture CUDA graphs and auto explores and learns its "
                         "costs there, which a long-running server does once")
    ap.add_argument("--reference-concurrency", type=int, default=4,
                    help="the concurrency whose AR per-user rate fixes the interactivity for the throughput ratio")
    ap.add_argument("--output", default=None,
                    help="results directory (default bench/results/<date>-<device>-openai-server)")
    args = ap.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    turns = load_prompt_set(args.dataset, args.num_prompts).turns
    date = datetime.date.today().isoformat()
    # what the servers run on: as given, else the engine directory's manifest, else the pair's defaults (server_command)
    runtime = (load_manifest(args.engine_dir).get("runtime") or {}) if args.engine_dir else PAIR_RUNTIME
    device, dtype = (args.device or str(runtime.get("device", "auto")), args.dtype or str(runtime.get("dtype", "auto")))
    out = Path(args.output or ROOT / "bench" / "results" / f"{date}-{device.split(':')[0]}-openai-server")

    rows: list[dict] = []
    outputs: dict[tuple[str, int], list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-openai-") as tmp:
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        if modes[0] != "ar":
            raise SystemExit("--modes must start with ar (the reference)")
        servers: dict[str, Server] = {}
        try:
            for mode in modes:  # one after another: an auto server times its cost table as it starts, and timed
                # beside other work its entries' ratios moved by up to 2x (bench/results/2026-11-28-cpu-s25/NOTES.md)
                s = servers[mode] = Server(mode, args, Path(tmp))
                s.wait_ready()
                graphs = s.metrics().get("dflash_cuda_graphs", 0)
                if graphs:
                    print(f"{s.mode}: {graphs:.0f} CUDA graphs captured at start", file=sys.stderr, flush=True)
                asyncio.run(run_level(s.url, turns[:1], 1, 8))  # it answers
                for _ in range(args.warmup_rounds):  # not measured: a server's first requests capture its graphs
                    asyncio.run(run_level(s.url, turns, max(levels), args.max_tokens))  # and teach auto its costs
            for c in levels:
                walls = dict.fromkeys(servers, 0.0)
                done: dict[str, list] = {mode: [] for mode in servers}
                before = {mode: s.metrics() for mode, s in servers.items()}
                for r in range(args.rounds):  # the order rotates per round: machine drift hits every mode alike
                    order = list(servers)[r % len(servers):] + list(servers)[: r % len(servers)]
                    for mode in order:
                        wall, results = asyncio.run(run_level(servers[mode].url, turns, c, args.max_tokens))
                        walls[mode] += wall
                        done[mode] += results
                for mode, s in servers.items():
                    after = s.metrics()
                    count = after["dflash_acceptance_length_count"] - before[mode]["dflash_acceptance_length_count"]
                    tau = (after["dflash_acceptance_length_sum"] - before[mode]["dflash_acceptance_length_sum"]) / count \
                        if count else None
                    row = summarize(mode, c, walls[mode], done[mode], tau)
                    # CUDA graphs captured inside the level (requests waited for them) and the seconds that took
                    row["graphs_captured"] = after.get("dflash_cuda_graphs", 0) - before[mode].get("dflash_cuda_graphs", 0)
                    row["first_use_s"] = (after.get("dflash_cuda_graph_first_use_seconds", 0)
                                          - before[mode].get("dflash_cuda_graph_first_use_seconds", 0))
                    row["draft_steps"] = {k.partition(":")[2]: int(v - before[mode].get(k, 0)) for k, v in after.items()
                                          if k.startswith("draft_steps:") and v > before[mode].get(k, 0)}
                    rows.append(row)
                    outputs[(mode, c)] = [x["text"] for x in done[mode]]  # every round's: each is checked against AR
                    print(f"{mode:9s} c={c:2d}: {row['total_tokens_per_s']:7.1f} tok/s total, "
                          f"{row['per_user_tokens_per_s']:6.1f} tok/s per user, TTFT mean {row['ttft_mean_ms']:6.1f} ms "
                          f"p50 {row['ttft_p50_ms']:6.1f} ms, tau {tau if tau is None else round(tau, 2)}"
                          + (f", {row['graphs_captured']:.0f} graphs captured in the level ({row['first_use_s']:.2f} s)"
                             if row["graphs_captured"] else "")
                          + (f", steps by draft {draft_steps_text(row['draft_steps'])}" if len(row["draft_steps"]) > 1
                             else ""),
                          file=sys.stderr, flush=True)
        finally:
            for s in servers.values():
                s.stop()
    drafted = modes[1:]
    same = {(m, c): outputs[(m, c)] == outputs[("ar", c)] for m in drafted for c in levels}
    same_across = all(outputs[(m, c)] == outputs[("ar", levels[0])] for m in modes for c in levels)
    fixed = fixed_interactivity(rows, modes, args.reference_concurrency)

    import torch

    report = {
        "date": date, "settings": {k: v for k, v in vars(args).items()}, "num_prompts": len(turns),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
                    "torch": torch.__version__,
                    "note": "shared machine: 2 CPU cores also used by other work during the run; numbers are noisy"},
        "results": rows, "outputs_equal_ar": {f"{m}@{c}": v for (m, c), v in same.items()},
        "outputs_equal_across_concurrency": same_across, "fixed_interactivity": fixed,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    pareto_plot(rows, modes, fixed, out / "pareto.png")
    by = {(r["mode"], r["concurrency"]): r for r in rows}
    lines = ["| concurrency | mode | total tok/s | vs AR | per-user tok/s | TTFT mean / p50 (ms) | mean tau | text = AR | "
             "steps by draft |", "|---|---|---|---|---|---|---|---|---|"]
    for c in levels:
        a = by[("ar", c)]
        for m in modes:
            d = by[(m, c)]
            lines.append(f"| {c} | {m} | {d['total_tokens_per_s']:.1f} | "
                         f"{d['total_tokens_per_s'] / a['total_tokens_per_s']:.2f}x | {d['per_user_tokens_per_s']:.1f} | "
                         f"{d['ttft_mean_ms']:.1f} / {d['ttft_p50_ms']:.1f} | "
                         f"{'-' if d['mean_tau'] is None else format(d['mean_tau'], '.2f')} | "
                         f"{'(reference)' if m == 'ar' else 'yes' if same[(m, c)] else 'NO'} | "
                         f"{draft_steps_text(d['draft_steps']) or '-'} |")
    table = "\n".join(lines)
    if fixed["per_user_tokens_per_s"] is not None:
        table += (f"\n\nThroughput at fixed interactivity ({fixed['per_user_tokens_per_s']:.1f} tok/s per user, the rate AR "
                  f"reaches at concurrency {args.reference_concurrency}; each mode's total tok/s interpolated along its "
                  "curve; where its curve stays above that rate, at least the most it gave at a faster rate; n/a where "
                  "it stays below): " + ", ".join(_fixed_cell(m, v) for m, v in fixed["modes"].items()))
    header = (f"# OpenAI server benchmark, {date}\n\n`python scripts/bench_openai_server.py "
              f"{' '.join(sys.argv[1:] if argv is None else argv)}`\n\n"
              f"{len(turns)} `{Path(args.dataset).stem}` prompts (chat template applied by the server), "
              f"{args.max_tokens} max tokens, greedy, streaming `/v1/chat/completions` through the `openai` client; "
              + (f"engine directory {args.engine_dir}, " if args.engine_dir else "")
              + f"--device {device}, --dtype {dtype}, "
              f"--torch-threads {args.torch_threads}, "
              f"--max-batch-size {args.max_batch_size}. Machine: {platform.machine()}, {os.cpu_count()} CPU cores "
              "shared with other work during the run (noisy).\n\nPer-user tok/s = mean over requests of "
              "(tokens - 1) / (latency - TTFT); TTFT = request sent -> first content chunk. pareto.png: total against "
              "per-user tok/s, one curve per mode over the concurrency levels.\n\n")
    (out / "README.md").write_text(header + table + f"\n\nOutputs identical across modes and concurrency levels: "
                                   f"{'yes' if same_across else 'no'}.\n")
    print(table)
    print(f"\nwrote {out / 'results.json'} and {out / 'README.md'}", file=sys.stderr)
    return 0 if all(same.values()) else 1


def _fixed_cell(mode: str, v: dict) -> str:
    if v["total_tokens_per_s"] is not None:
        return f"{mode} {v['total_tokens_per_s']:.1f} tok/s ({v['vs_ar']:.2f}x)"
    if v["at_least_tokens_per_s"] is not None:
        return f"{mode} >= {v['at_least_tokens_per_s']:.1f} tok/s (>= {v['vs_ar_at_least']:.2f}x)"
    return f"{mode} n/a"


def fixed_interactivity(rows: list[dict], modes: list[str], reference_concurrency: int) -> dict:
    """Total tok/s of each mode at the per-user rate AR reaches at `reference_concurrency` (linear interpolation along
    the mode's (per-user, total) curve over concurrency; None where the curve does not span that rate, and then, for a
    curve entirely above that rate — every level serves its users faster — `at_least_tokens_per_s`: the most total
    tok/s of its levels, a lower bound)."""
    ref = next((r for r in rows if r["mode"] == "ar" and r["concurrency"] == reference_concurrency), None)
    if ref is None or ref["per_user_tokens_per_s"] is None:
        return {"per_user_tokens_per_s": None, "modes": {}}
    target = ref["per_user_tokens_per_s"]
    result = {}
    for m in modes:
        pts = sorted((r["per_user_tokens_per_s"], r["total_tokens_per_s"]) for r in rows
                     if r["mode"] == m and r["per_user_tokens_per_s"] is not None)
        value = None
        for (u0, t0), (u1, t1) in zip(pts, pts[1:]):
            if u0 <= target <= u1:
                value = t0 if u1 == u0 else t0 + (t1 - t0) * (target - u0) / (u1 - u0)
                break
        if value is None and any(abs(u - target) < 1e-9 for u, _ in pts):
            value = next(t for u, t in pts if abs(u - target) < 1e-9)
        # a curve that stays above the rate: each of its points serves every user at least that fast, so the most
        # any of them gives is a lower bound of its throughput there (more concurrency would only add to it)
        faster = [t for u, t in pts if u >= target]
        result[m] = {"total_tokens_per_s": value,
                     "at_least_tokens_per_s": max(faster) if value is None and faster and pts[0][0] >= target else None}
    base = result["ar"]["total_tokens_per_s"]
    for v in result.values():
        v["vs_ar"] = v["total_tokens_per_s"] / base if v["total_tokens_per_s"] is not None and base else None
        v["vs_ar_at_least"] = v["at_least_tokens_per_s"] / base if v["at_least_tokens_per_s"] is not None and base else None
    return {"per_user_tokens_per_s": target, "reference_concurrency": reference_concurrency, "modes": result}


def pareto_plot(rows: list[dict], modes: list[str], fixed: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for m in modes:
        pts = sorted((r["concurrency"], r["per_user_tokens_per_s"], r["total_tokens_per_s"]) for r in rows
                     if r["mode"] == m and r["per_user_tokens_per_s"] is not None)
        ax.plot([u for _, u, _ in pts], [t for _, _, t in pts], marker="o", label=m)
        for c, u, t in pts:
            ax.annotate(f"c={c}", (u, t), textcoords="offset points", xytext=(3, 3), fontsize=7)
    if fixed.get("per_user_tokens_per_s"):
        ax.axvline(fixed["per_user_tokens_per_s"], color="grey", linestyle=":", linewidth=1,
                   label=f"AR per-user rate at c={fixed['reference_concurrency']}")
    ax.set_xlabel("per-user tok/s (decode after the first token)")
    ax.set_ylabel("total tok/s")
    ax.set_title("OpenAI server: throughput vs interactivity")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
