#!/usr/bin/env python
"""Draft budgets side by side, in one process: AR and every `--draft` mode on the same engine, interleaved batch by
batch (the order changes per batch, so a drifting machine load hits every mode alike, and every mode runs right after
every other equally often: see _orders), greedy.

    python scripts/bench_draft_budget.py [--target DIR --drafter DIR] [--dataset data/prompts/eagle_gsm8k.jsonl]
        [--num-prompts 40] [--max-new-tokens 128] [--batch-sizes 1,8]
        [--modes chain:4,chain:8,chain:16,tree:16,tree:32,auto] [--torch-threads 1] [--device cpu|cuda]
        [--decode-loop auto|host|device] [--steps-per-sync 4] [--warmup 0] [--graphs up-front|first-use] [--output DIR]

`dflash-trt bench` measures one DFlash mode against AR per run; comparing modes across runs mixes in the machine's
drift between runs (on a shared 2-core VM the AR rate moves by 10 % from one run to the next). Here every mode runs
on every batch of prompts in the same minute. auto starts from nothing (its cost table is measured before the timed
part, its acceptance curves are learnt during it, as a fresh server would). Every mode's tokens must equal AR's.
The engine runs its default decode loop unless --decode-loop says (on a GPU with the plugin kernels: the device loop's
CUDA graphs). Before timing, every step shape of every mode is captured, as a server does at start (--graphs
first-use instead leaves each shape to its first window, as an embedded generate() does: auto meets more shapes than a
fixed mode, some first inside the timed part, and on an H200 those first uses were 2-5 % of its time at batch 8 / 16);
--warmup N then runs every mode on N batches untimed (kernels warm), and auto forgets what it learnt there.

Prints and writes (results.json, README.md): per batch size and mode, decode tok/s, its ratio to AR, mean τ, the CUDA
graphs captured inside the timed part and the time their first uses took, the steady rate without that time, the
decode windows run and their mean time (without prefills and first uses; host work between windows included), and for
auto how often it chose each draft.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import gc
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "gsm8k-tiny"


def main(argv=None) -> int:
    from dflash_trt.capabilities import DECODE_LOOPS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default=str(FIXTURE / "target"))
    p.add_argument("--drafter", default=str(FIXTURE / "drafter"))
    p.add_argument("--dataset", default=str(ROOT / "data" / "prompts" / "eagle_gsm8k.jsonl"))
    p.add_argument("--num-prompts", type=int, default=40)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--batch-sizes", default="1,8")
    p.add_argument("--modes", default="chain:4,chain:8,chain:16,tree:16,tree:32,auto")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--max-seq-len", type=int, default=512)
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    p.add_argument("--decode-loop", choices=DECODE_LOOPS, default="auto",
                   help="host: one step per window; device: --steps-per-sync steps per window; auto (default): device "
                        "where CUDA graphs run, else host")
    p.add_argument("--steps-per-sync", type=int, default=4, help="steps per window of the device loop (default 4)")
    p.add_argument("--warmup", type=int, default=0, help="untimed batches of every mode before timing (default 0)")
    p.add_argument("--graphs", choices=("up-front", "first-use"), default="up-front",
                   help="CUDA graphs: up-front (default) captures every step shape of every mode before timing, as a "
                        "server does at start (BatchScheduler.capture_graphs); first-use leaves each shape to its first "
                        "window, as an embedded generate() does (the steady line then subtracts those windows' time)")
    p.add_argument("--output", default=None)
    args = p.parse_args(argv)

    import torch

    from dflash_trt import SamplingParams
    from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
    from dflash_trt.engines.torch_engine import TorchEngine
    from dflash_trt.spec import budget as budget_module

    torch.set_num_threads(args.torch_threads)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    modes = [m.strip() for m in args.modes.split(",")]
    turns = load_prompt_set(args.dataset, args.num_prompts).turns
    params = SamplingParams(max_new_tokens=args.max_new_tokens)
    choices: collections.Counter = collections.Counter()  # auto's windows read, by batch size and draft
    # what the scheduler tells the budget each window cost, per step (window + the host work up to the next window):
    # by mode and draft, for windows of the full batch, so a draft's windows under auto compare with its fixed mode's
    step_times: dict = collections.defaultdict(list)
    timing = {"mode": None, "size": None}

    def recording(observe_time):
        def observe(self, n, draft, seconds_per_step, length=None):
            if n == timing["size"] and timing["mode"] is not None:
                step_times[(timing["mode"], str(draft))].append(seconds_per_step)
            return observe_time(self, n, draft, seconds_per_step, length)
        return observe

    budget_module.AutoBudget.observe_time = recording(budget_module.AutoBudget.observe_time)
    budget_module.Fixed.observe_time = recording(budget_module.Fixed.observe_time)
    report = {"date": datetime.date.today().isoformat(), "platform": platform.platform(), "torch": torch.__version__,
              "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
              "settings": vars(args), "results": {}}
    for size in sizes:
        # The last batch size's engine is freed here, not by a cyclic collection that lands inside this size's timed
        # part (its objects hold reference cycles: tearing its CUDA graphs and memory down there cost one mode's
        # windows ~150-200 ms; on an H200, 2026-11-27, auto / best fixed at batch 8 read 0.68-0.70 after batch 1 in
        # the same process, 0.95 alone or with the collector off)
        engine = read = discard = prefill = None
        _collect(args.device)
        engine = TorchEngine.from_pretrained(args.target, args.drafter, device=args.device, max_batch_size=size,
                                             decode_loop=args.decode_loop, steps_per_sync=args.steps_per_sync,
                                             max_seq_len=args.max_seq_len)
        prompts = [encode_prompt(engine.tokenizer, t, args.max_seq_len - args.max_new_tokens)[0] for t in turns]
        batches = [prompts[i: i + size] for i in range(0, len(prompts), size)]
        engine.generate(batches[0][:1], SamplingParams(max_new_tokens=8), draft="auto")  # auto's cost table
        measured = engine.cost_table.seconds if engine.cost_table else {}
        costs = {_entry(key): round(s * 1e3, 4) for key, s in sorted(measured.items()) if key[0] in (1, size)}
        print(f"batch {size}: auto's measured cost table, ms per step: {costs}", flush=True)
        all_modes = ["ar"] + modes
        up_front = (0, 0.0)
        if args.graphs == "up-front":  # (none on a CPU: no CUDA graphs there)
            for mode in all_modes:
                scheduler = engine.new_scheduler(**_mode_args(mode))
                up_front = tuple(a + b for a, b in zip(up_front, scheduler.capture_graphs()))
            scheduler = None
            if up_front[0]:
                print(f"batch {size}: {up_front[0]} CUDA graphs captured up front in {up_front[1]:.1f} s", flush=True)
        for batch in batches[: args.warmup]:
            for mode in all_modes:
                engine.generate(batch, params, **_mode_args(mode))
        engine.draft_curve, engine.tree_curves = None, {}  # ... but nothing learnt yet
        engine.draft_calibration = budget_module.Calibration()
        _collect(args.device)  # the warm-up's garbage too: the timed part starts with none pending
        choices.clear()
        step_times.clear()
        timing["size"] = size
        seconds = dict.fromkeys(all_modes, 0.0)
        tokens = dict.fromkeys(all_modes, 0)
        taus: dict[str, list[int]] = {m: [] for m in all_modes}
        outputs: dict[str, list] = {m: [] for m in all_modes}
        captured = dict.fromkeys(all_modes, 0)  # CUDA graphs each mode captured inside the timed part
        capture_s = dict.fromkeys(all_modes, 0.0)  # ... and the seconds their first uses took (eager run + capture)
        windows = dict.fromkeys(all_modes, 0)  # decode windows each mode ran (host reads)
        dropped = dict.fromkeys(all_modes, 0)  # windows launched ahead and dropped unread (their requests had ended)
        prefill_s = dict.fromkeys(all_modes, 0.0)  # ... and the seconds its prefills took
        read, discard, prefill = engine.step_runner.read, engine.step_runner.discard, engine.step_runner.prefill
        launch, resume = engine.step_runner.launch, engine.step_runner.resume
        current = [None]
        # host time on the critical path, per mode: from a window's read to the next window's start (its launch, or
        # the resume of one launched ahead: the device runs only that window's first step meanwhile) within a
        # generate() call, and from the call to its first window's start less its prefills (a new scheduler, the
        # budget's prefill check, the first choice). On an H200 auto's windows cost 134 us more than tree:32's on
        # average while its median step cost 8 us more (2026-11-27): these say how much of it is the host's.
        gaps: dict = {m: [] for m in all_modes}
        setups: dict = {m: [] for m in all_modes}
        call = {"start": None, "prefill_s": 0.0, "read": None}

        def window_start():
            now = time.perf_counter()
            if call["read"] is not None:
                gaps[current[0]].append(now - call["read"])
            elif call["start"] is not None:  # the call's first window
                setups[current[0]].append(now - call["start"] - (prefill_s[current[0]] - call["prefill_s"]))
                call["start"] = None

        def timed_launch(*a, **kw):
            if kw.get("run") is None:  # (a window launched ahead starts at its resume)
                window_start()
            return launch(*a, **kw)

        def timed_resume(*a, **kw):
            window_start()
            return resume(*a, **kw)

        def counting_read(launched, *a, **kw):
            windows[current[0]] += 1
            if current[0] == "auto":
                choices[(len(launched.slots), f"{'tree' if launched.tree else 'chain'}:{launched.k}")] += 1
            try:
                return read(launched, *a, **kw)
            finally:
                call["read"] = time.perf_counter()

        def counting_discard(*a, **kw):
            dropped[current[0]] += 1
            return discard(*a, **kw)

        def timed_prefill(*a, **kw):
            t = time.perf_counter()
            try:
                return prefill(*a, **kw)
            finally:
                prefill_s[current[0]] += time.perf_counter() - t

        engine.step_runner.read, engine.step_runner.discard = counting_read, counting_discard
        engine.step_runner.prefill, engine.step_runner.launch = timed_prefill, timed_launch
        engine.step_runner.resume = timed_resume
        for batch, order in zip(batches, _orders(all_modes, len(batches))):
            for mode in order:
                graphs, capturing = len(engine.step_runner.graphs), engine.step_runner.capture_s
                current[0] = timing["mode"] = mode
                t0 = time.perf_counter()
                call.update(start=t0, prefill_s=prefill_s[mode], read=None)
                results = engine.generate(batch, params, **_mode_args(mode))
                seconds[mode] += time.perf_counter() - t0
                captured[mode] += len(engine.step_runner.graphs) - graphs
                capture_s[mode] += engine.step_runner.capture_s - capturing
                tokens[mode] += sum(len(r.token_ids) for r in results)
                taus[mode] += [t for r in results for t in r.stats.taus]
                outputs[mode] += [r.token_ids for r in results]
        rows = {}
        # steady: without the timed part's first uses of a shape (a one-off per process: a server captures once)
        steady = {m: tokens[m] / (seconds[m] - capture_s[m]) for m in all_modes}
        for mode in all_modes:
            rate = tokens[mode] / seconds[mode]
            rows[mode] = {"tok_s": rate, "vs_ar": rate / (tokens["ar"] / seconds["ar"]),
                          "mean_tau": sum(taus[mode]) / max(len(taus[mode]), 1) if mode != "ar" else 1.0,
                          "equal_to_ar": outputs[mode] == outputs["ar"], "graphs_captured": captured[mode],
                          "capture_s": capture_s[mode], "steady_tok_s": steady[mode],
                          "steady_vs_ar": steady[mode] / steady["ar"], "windows": windows[mode],
                          "windows_dropped": dropped[mode],
                          "ms_per_window": 1e3 * (seconds[mode] - capture_s[mode] - prefill_s[mode])
                          / max(windows[mode], 1)}
        table = engine.cost_table
        if table is not None:  # what auto learnt online: the machine's drift and its probes' cost over their entries
            overhead = ", ".join(f"n={n} {s * 1e3:.3f} ms" for n, s in sorted(table.overhead.items())) or "none"
            print(f"  auto's cost table after the run: drift {table.drift:.3f}, probe factor {table.probe_factor:.3f}, "
                  f"overhead per window {overhead}; "
                  + ", ".join(f"{_entry(key)} {s * 1e3:.4f} ms" for key, s in sorted(table.seconds.items())
                              if key[0] == 1),
                  flush=True)
        best_fixed = max((m for m in modes if m != "auto"), key=lambda m: rows[m]["tok_s"], default=None)
        auto_choices = {f"n={n} {d}": c for (n, d), c in sorted(choices.items())}
        report["results"][str(size)] = {"rows": rows, "best_fixed": best_fixed, "auto_choices": auto_choices,
                                        "cost_table_ms": costs, "graphs_up_front": up_front[0],
                                        "decode_loop": engine.decode_loop, "device": str(engine.device)}
        engine.step_runner.read, engine.step_runner.discard, engine.step_runner.prefill = read, discard, prefill
        engine.step_runner.launch, engine.step_runner.resume = launch, resume
        host = {m: {"between_windows_ms": _spread(gaps[m]), "before_first_window_ms": _spread(setups[m])}
                for m in all_modes}
        report["results"][str(size)]["host_ms"] = host
        cells = (f"{m} {r['tok_s']:.1f} tok/s ({r['vs_ar']:.3f}x AR, tau {r['mean_tau']:.2f}, "
                 f"{r['ms_per_window']:.2f} ms x {r['windows']} windows"
                 f"{', %d launched ahead and dropped' % r['windows_dropped'] if r['windows_dropped'] else ''}"
                 f"{'' if r['equal_to_ar'] else ', DIFFERS'}"
                 f"{', %d graphs captured in %.0f ms' % (r['graphs_captured'], 1e3 * r['capture_s']) if r['graphs_captured'] else ''})"
                 for m, r in rows.items())
        print(f"batch {size} ({engine.device}, {engine.decode_loop} loop): " + "  ".join(cells), flush=True)
        if "auto" in rows and best_fixed:
            print(f"  auto / best fixed ({best_fixed}): {rows['auto']['tok_s'] / rows[best_fixed]['tok_s']:.3f}; "
                  f"auto chose {auto_choices}", flush=True)
        print(f"  host ms on the critical path by mode (median / mean / p90, count): between windows "
              + ", ".join(f"{m} {_fmt(h['between_windows_ms'])}" for m, h in host.items())
              + "; before a generate() call's first window (less its prefills) "
              + ", ".join(f"{m} {_fmt(h['before_first_window_ms'])}" for m, h in host.items()), flush=True)
        # the mean beside the median: on an H200 auto's windows cost 134 us more than tree:32's on average while its
        # median step cost 8 us more (2026-11-27): the difference is in some windows, not in every one
        per_draft = {f"{m} {d}": (round(1e3 * statistics.median(v), 4), round(1e3 * statistics.fmean(v), 4), len(v))
                     for (m, d), v in sorted(step_times.items())}
        report["results"][str(size)]["step_ms_by_draft"] = per_draft
        print(f"  ms per step at n={size} by mode and draft (median / mean, windows; window + host work to the next): "
              + ", ".join(f"{k} {ms:.3f} / {mean:.3f} ({c})" for k, (ms, mean, c) in per_draft.items()), flush=True)
        if any(captured.values()):
            steady_best = max((m for m in modes if m != "auto"), key=lambda m: steady[m], default=None)
            print("  steady (without first-use captures): " + "  ".join(
                f"{m} {steady[m]:.1f} tok/s ({steady[m] / steady['ar']:.3f}x AR)" for m in all_modes)
                + (f"; auto / best fixed ({steady_best}): {steady['auto'] / steady[steady_best]:.3f}"
                   if "auto" in steady and steady_best else ""), flush=True)
    if args.output:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
        lines = [f"# Draft budgets side by side, {report['date']}", "",
                 f"`python scripts/bench_draft_budget.py {' '.join(argv if argv is not None else sys.argv[1:])}`", "",
                 "Steady: without the time the timed part spent on first uses of a shape (CUDA graphs: its eager "
                 "run and capture, once per process).", "",
                 "| batch | mode | tok/s | vs AR | mean τ | tokens = AR | graphs captured (ms) | steady tok/s | "
                 "steady vs AR |", "|---|---|---|---|---|---|---|---|---|"]
        for size, res in report["results"].items():
            for mode, r in res["rows"].items():
                lines.append(f"| {size} | {mode} | {r['tok_s']:.1f} | {r['vs_ar']:.3f}x | {r['mean_tau']:.2f} | "
                             f"{'yes' if r['equal_to_ar'] else 'NO'} | {r['graphs_captured']} "
                             f"({1e3 * r['capture_s']:.0f}) | {r['steady_tok_s']:.1f} | {r['steady_vs_ar']:.3f}x |")
        (out / "README.md").write_text("\n".join(lines) + "\n")
    return 0 if all(r["equal_to_ar"] for res in report["results"].values() for r in res["rows"].values()) else 1


def _spread(seconds: list[float]) -> dict:
    """Median, mean and 90th percentile in ms, and the count."""
    if not seconds:
        return {"median": None, "mean": None, "p90": None, "count": 0}
    from dflash_trt.bench.metrics import percentile

    ms = [1e3 * s for s in seconds]
    return {"median": round(statistics.median(ms), 4), "mean": round(statistics.fmean(ms), 4),
            "p90": round(percentile(ms, 0.9), 4), "count": len(ms)}


def _fmt(spread: dict) -> str:
    if not spread["count"]:
        return "-"
    return f"{spread['median']:.3f} / {spread['mean']:.3f} / {spread['p90']:.3f} ({spread['count']})"


def _orders(modes: list[str], count: int) -> list[list[str]]:
    """The order the modes run in for each of `count` batches: the rows of a Williams design in turn, a Latin square
    (every mode in every place once) in which every mode runs right after every other mode equally often (for an odd
    number of modes, its rows and then the same rows reversed). Why: a window's cost depends on what ran before it
    (caches, the allocator's heap), and so does a run's: decode-only at batch 1 on this CPU (2026-11-27,
    bench/results/2026-11-27-cpu-s17/predecessor.py, 80 prompts paired), chain:8 took 1.2 % longer right after AR
    than right after tree:32 (median 1.8 %, 63 of 80 prompts). Rotated instead (each batch's order the one before
    shifted by one), every mode ran after the same mode in all but one batch of every len(modes): with the six modes
    by default, auto after tree:32 and chain:8 after chain:4; with four, chain:8 after AR."""
    n = len(modes)
    first, low, high = [0], 1, n - 1  # 0, 1, n-1, 2, n-2, ...: each row is it shifted
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    rows = [[(x + shift) % n for x in first] for shift in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return [[modes[x] for x in rows[i % len(rows)]] for i in range(count)]


def _mode_args(mode: str) -> dict:
    """A mode's engine arguments (generate, new_scheduler): AR without the drafter, else its draft."""
    return {"use_drafter": False} if mode == "ar" else {"draft": mode}


def _collect(device: str) -> None:
    """Free what is unreachable now (and, on CUDA, the allocator's cached blocks), before a timed part."""
    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _entry(key: tuple) -> str:
    """A cost table entry's name: n=<batch> <draft> (and L=<cache length> where the table has lengths)."""
    return f"n={key[0]} {key[1]}" + (f" L={key[2]}" if len(key) == 3 else "")


if __name__ == "__main__":
    sys.exit(main())
