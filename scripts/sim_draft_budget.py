#!/usr/bin/env python
"""Draft budgets replayed on measured acceptance traces: what each fixed draft, `auto` and the per-step oracle would
reach on the same prompts, in seconds of simulated time instead of minutes of benchmark.

    python scripts/sim_draft_budget.py [--target DIR --drafter DIR] [--dataset data/prompts/eagle_gsm8k.jsonl]
        [--num-prompts 80] [--max-new-tokens 128] [--batch-sizes 1,8] [--continuous] [--torch-threads 1] [--output DIR]
        [--traces DIR/traces.json --costs DIR/costs.json] [--time-noise 0.05 --seed S] [--startup-noise 0.07]

Why it is exact: at greedy, the output is the AR output whatever the drafts, and the drafter's proposal at a position
depends only on the verified prefix (its context = the target's features of every token before the block), not on
which steps led there. So for every position t of the continuation we measure once (one target forward with taps over
prompt + AR output, then the drafter's block at every anchor in a few batched `forward_train` passes, as in training):

    L(t)        drafts a chain accepts at t (leading block drafts equal to the AR tokens; chain:K accepts min(L, K - 1))
    tree N      the depth of the longest path of the best-first tree of N nodes (spec/tree.py) that follows the AR
                tokens, and how deep the drafter's argmax chain lies inside that tree (what auto learns from a tree)

and any policy's run is a walk over t: choose a draft, τ = its acceptance at t + 1 (capped by the tokens left),
t += τ. Time = the sum of cost(n, draft) over the windows, cost from a table of real window times (each fixed draft run
through the engine's scheduler on the same prompts in batches of the largest size, timed per window by batch size
as requests leave; --costs FILE reuses one). `auto` is the real `AutoBudget` fed
those observations (its own cost table: the engine's startup measurement, as when serving); the oracle (batch 1)
chooses every step knowing every L(t): a dynamic program over t, the upper bound of any per-step policy with this
cost table. auto refines its table with the true window costs as it goes, as the engine does with measured ones. A batch of n prompts runs windows until all are done (one draft per window for the whole batch, requests
leave when done, as the scheduler does).

Prints and writes (results.json, README.md): per batch size, simulated tok/s of each policy and its ratio to AR, mean
τ, and for batch 1 the oracle.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "gsm8k-tiny"
MIN_WINDOWS = 5  # windows a (batch size, draft) needs in the cost measurement to have an entry of its own
DRAFTS = ("chain:1", "chain:2", "chain:4", "chain:8", "chain:16", "tree:16", "tree:32")
DRIFT_GRID = 0.01  # seconds of the replay's clock per step of the machine's speed walk (--machine-drift)


def acceptance_traces(engine, prompts: list[list[int]], max_new_tokens: int, tree_sizes=(16, 32), chunk: int = 32):
    """Per prompt: the AR continuation, and per anchor t (0 = the first decode step) L(t), and per tree size N the
    accepted depth and the argmax chain's depth inside the tree."""
    import torch

    from dflash_trt import SamplingParams
    from dflash_trt.spec.tree import build_tree, max_depth
    from dflash_trt.train.trainer import block_visibility

    target, drafter, runner = engine.target, engine.drafter, engine.step_runner
    b = drafter.block_size
    traces = []
    # The AR continuation a block past the budget and past EOS: a step near the end verifies (and reports in τ)
    # drafts beyond them; the request itself ends at the first EOS or the budget.
    outs = engine.generate(prompts, SamplingParams(max_new_tokens=max_new_tokens + b - 1, ignore_eos=True),
                           use_drafter=False)
    eos = set(engine.target.cfg.eos_token_ids)
    for prompt, out in zip(prompts, outs):
        seq = list(prompt) + list(out.token_ids)
        ends = [i + 1 for i, t in enumerate(out.token_ids) if t in eos]
        s, p = len(seq), len(prompt)
        ids = torch.tensor([seq])
        slots = torch.zeros(1, dtype=torch.long)
        with torch.inference_mode():
            runner.target_cache.set_lengths(slots, torch.zeros(1, dtype=torch.long))
            _, features = target(ids, runner.target_cache, slots, logits_at=torch.tensor([[s - 1]]), tap=True,
                                 max_length=s, host_slots=[0])
            runner.target_cache.set_lengths(slots, torch.zeros(1, dtype=torch.long))
            anchors = list(range(p, s - 1))  # the block's last verified token sits at t; its drafts predict t + 1 ...
            chain, trees = [], {n: ([], []) for n in tree_sizes}
            for i in range(0, len(anchors), chunk):
                a = torch.tensor([anchors[i: i + chunk]])
                m = a.shape[1]
                positions = a[:, :, None] + torch.arange(b)
                block = torch.full((1, m, b), drafter.mask_token_id, dtype=torch.long)
                block[:, :, 0] = ids.gather(1, a)
                hidden = drafter.forward_train(target.embed(block).reshape(1, m * b, -1), positions.reshape(1, m * b),
                                               features, torch.arange(s)[None], block_visibility(a, s, b))
                logits = target.logits(hidden.reshape(m, b, -1)[:, 1:])  # [m, B - 1, V]
                truth = torch.tensor([[seq[t + j] if t + j < s else -1 for j in range(1, b)] for t in anchors[i: i + chunk]])
                chain += (logits.argmax(-1) == truth).long().cumprod(1).sum(1).tolist()
                roots = torch.tensor([seq[t] for t in anchors[i: i + chunk]])
                for n in tree_sizes:
                    depth = max_depth(n, b)
                    tree = build_tree(logits[:, :depth], roots, n)
                    # a node is accepted if its whole root path follows the AR tokens: its token = the truth at its depth
                    ok = torch.ones_like(tree.tokens, dtype=torch.bool)
                    follows = tree.tokens == torch.cat([roots[:, None], truth[:, :depth]], 1).gather(1, tree.depth)
                    for j in range(1, n):  # parents precede children: one pass
                        ok[:, j] = follows[:, j] & ok.gather(1, tree.parents[:, j: j + 1].clamp_min(0))[:, 0]
                    trees[n][0].extend(torch.where(ok, tree.depth, 0).max(1).values.tolist())
                    trees[n][1].extend(tree.chain_depth.tolist())
        traces.append({"prompt_len": p, "tokens": min(ends[:1] + [max_new_tokens]), "chain": chain,
                       "trees": {str(n): {"accepted": v[0], "chain_depth": v[1]} for n, v in trees.items()}})
    return traces


class Walk:
    """One request replayed over its trace."""

    def __init__(self, rid, trace, block_size):
        self.rid, self.trace, self.block_size = rid, trace, block_size
        self.produced = 1  # the prefill's token
        self.taus: list[int] = []

    @property
    def done(self) -> bool:
        return self.produced >= self.trace["tokens"]

    def step(self, draft) -> tuple[int, tuple[int, int] | None]:
        """τ of one step with `draft` (it emits min(τ, tokens left)), and for a tree its argmax chain's (K, τ)."""
        t = self.produced - 1
        left = self.trace["tokens"] - self.produced
        chain = self.trace["chain"][t] if t < len(self.trace["chain"]) else 0
        if draft.tree:  # the chain as deep as the step verifies it (spec/tree.chain_equivalent)
            tr = self.trace["trees"][str(draft.size)]
            accepted, depth = tr["accepted"][t], tr["chain_depth"][t]
            known = int(min(chain, depth) == depth and depth < min(draft.size, self.block_size) - 1)
            equiv = (depth + 1 + known, min(chain, depth + known) + 1)
        else:
            accepted, equiv = min(chain, draft.size - 1), None
        tau = accepted + 1  # what the engine reports (and auto learns): the budget cuts the emission, not τ
        self.produced += min(tau, left)
        self.taus.append(tau)
        return tau, equiv


def simulate(traces, batch_size, policy, cost, block_size, continuous=False, noise=0.0, drift=0.0, seed=0, steps=1):
    """Replays `policy` (a budget: choose/observe_window/prepare/forget, or a fixed Draft) over the traces in batches
    of `batch_size` (continuous: as a server at that concurrency, the next request joins as soon as one finishes);
    returns (tokens, seconds, τs). Windows of `steps` steps of one draft (the device loop's steps_per_sync; a request
    that finishes inside a window leaves at its end, the window's time is all its steps'), and, as the scheduler
    does, a window's observations are handed over after the next window's choice (which does not see them yet).
    noise / drift: a window's time is its cost times exp(N(0, noise)) times the machine's speed, a random walk in log
    with steps N(0, drift) per DRIFT_GRID seconds of the replay's clock (a shared CPU; about a window at batch 1 on this
    CPU), seeded: every policy replayed with a seed meets the same machine at the same time, whatever its windows
    (per window instead, a policy of many cheap windows, AR's, walked ~4x as far as a drafting one in the same run)."""
    from dflash_trt.spec.budget import Draft

    rng, machine, speeds = random.Random(seed), random.Random(f"walk {seed}"), [0.0]

    def speed_at(t):
        step = int(t / DRIFT_GRID)
        while len(speeds) <= step:
            speeds.append(speeds[-1] + machine.gauss(0.0, drift))
        return speeds[step]

    fixed = isinstance(policy, Draft)
    tokens, seconds, taus = sum(t["tokens"] for t in traces), 0.0, []
    waiting = list(enumerate(traces))
    live: list[Walk] = []
    unobserved = None  # the last window's (walks, draft, τs, chains), not handed over yet

    def hand_over():
        walks, d, window_taus, chains = unobserved
        policy.observe_window([w.rid for w in walks], d, window_taus, chains, [w.done for w in walks])
        for w in walks:
            if w.done:
                policy.forget(w.rid)
        policy.prepare(now=steps > 1)  # windows of several steps: the device loop on a GPU, which takes every one in

    while waiting or live:
        if continuous or not live:
            while waiting and len(live) < batch_size:
                i, trace = waiting.pop(0)
                walk = Walk(i, trace, block_size)
                if not walk.done:
                    live.append(walk)
            if not live:
                continue
        d = policy if fixed else policy.choose([w.rid for w in live], [w.trace["tokens"] - w.produced for w in live])
        speed = speed_at(seconds) if drift else 0.0
        took = steps * cost(len(live), d) * math.exp(speed + (rng.gauss(0.0, noise) if noise else 0.0))
        seconds += took
        if not fixed:
            policy.observe_time(len(live), d, took / steps)
            if unobserved is not None:
                hand_over()
        window_taus, chains = [], []
        for w in live:
            w_taus, w_chains = [], []
            for _ in range(steps):
                if w.done:
                    break
                tau, equiv = w.step(d)
                w_taus.append(tau)
                if equiv:
                    w_chains.append(equiv)
            window_taus.append(w_taus)
            chains.append(w_chains)
        unobserved = (list(live), d, window_taus, chains)
        for w in [w for w in live if w.done]:
            taus += w.taus
        live = [w for w in live if not w.done]
        if not live and not fixed:
            hand_over()
            unobserved = None
    return tokens, seconds, taus


def oracle(traces, cost, drafts, block_size):
    """Batch 1: the least time to finish each request choosing every step's draft knowing every L(t)."""
    tokens, seconds = 0, 0.0
    for i, tr in enumerate(traces):
        n = tr["tokens"]
        best = [0.0] * (n + 1)  # best[p]: seconds to finish from `p` tokens produced
        for p in range(n - 1, 0, -1):
            options = []
            for d in drafts:
                w = Walk(i, tr, block_size)
                w.produced = p
                tau, _ = w.step(d)
                options.append(cost(1, d) + best[min(p + tau, n)])
            best[p] = min(options)
        tokens += n
        seconds += best[1]
    return tokens, seconds


def measure_window_costs(engine, prompts, batch_size, drafts, max_new_tokens):
    """Median seconds per window by (n, draft): each fixed draft run through the scheduler on the prompts in batches
    of `batch_size`, interleaved batch by batch; requests leave as they finish, so windows of every n <= batch_size
    are timed (a step's cost is not linear in n: interpolating between a few batch sizes misjudges it by 10 %)."""
    from dflash_trt import SamplingParams
    from dflash_trt.spec import budget as budget_module

    times: dict = {}
    observe = budget_module.Fixed.observe_time
    mode = [None]

    def record(self, n, draft, seconds_per_step, length=None):
        times.setdefault((n, mode[0]), []).append(seconds_per_step)

    auto_choose, auto_observe = budget_module.AutoBudget.choose, budget_module.AutoBudget.observe_time
    budget_module.Fixed.observe_time = budget_module.AutoBudget.observe_time = record
    budget_module.AutoBudget.choose = lambda self, requests, left=None, length=None: budget_module.Draft("chain", 1)
    try:
        params = SamplingParams(max_new_tokens=max_new_tokens)
        batches = [prompts[i: i + batch_size] for i in range(0, len(prompts), batch_size)]
        for i, batch in enumerate(batches):
            for d in drafts[i % len(drafts):] + drafts[: i % len(drafts)]:
                mode[0] = d
                kw = {"use_drafter": False} if d == "ar" else {"draft": "auto" if d == "chain:1" else d}
                engine.generate(batch, params, **kw)
    finally:
        budget_module.Fixed.observe_time = observe
        budget_module.AutoBudget.choose, budget_module.AutoBudget.observe_time = auto_choose, auto_observe
    # a batch size a draft's windows rarely ran at (AR's requests leave together: its windows of 2-7 requests are a few
    # at a batch's end) is interpolated from its neighbours instead: one such window (4.5 ms against 2.5 at batch 4
    # and 8) had made every AR window of 3 or more requests cost that, monotone in n
    return {k: sorted(v)[len(v) // 2] for k, v in times.items() if len(v) >= MIN_WINDOWS or k[0] == 1}


def parse_draft(text: str):
    """str(Draft) back: "chain:8" -> Draft("chain", 8)."""
    from dflash_trt.spec.budget import Draft

    kind, size = text.split(":")
    return Draft(kind, int(size))


def cost_tables(raw: dict, startup: dict) -> tuple:
    """costs.json's two tables ({"n|draft[|length]": seconds}) as the replay uses them: (window: {(n, Draft): s} of
    the drafting engine's windows, their CostTable, plain AR's windows' CostTable ("ar"), the startup table as
    {(n, Draft[, length]): s} — auto's, by cache length: the replay, which knows no lengths, prices every window at
    its shortest)."""
    from dflash_trt.spec.budget import CostTable, Draft

    def keyed(entries: dict) -> dict:
        return {(int(n), d, *map(int, at)): s for (n, d, *at), s in ((key.split("|"), s) for key, s in entries.items())}

    windows = keyed(raw)
    window = {(n, parse_draft(d)): s for (n, d), s in windows.items() if d != "ar"}
    plain_ar = CostTable.measured({(n, Draft("chain", 1)): s for (n, d), s in windows.items() if d == "ar"},
                                  refine=False)
    believed = {(n, parse_draft(d), *at): s for (n, d, *at), s in keyed(startup).items()}
    return window, CostTable.measured(window, refine=False), plain_ar, believed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default=str(FIXTURE / "target"))
    p.add_argument("--drafter", default=str(FIXTURE / "drafter"))
    p.add_argument("--dataset", default=str(ROOT / "data" / "prompts" / "eagle_gsm8k.jsonl"))
    p.add_argument("--num-prompts", type=int, default=80)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--batch-sizes", default="1,8")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--max-seq-len", type=int, default=512)
    p.add_argument("--traces", default=None, help="reuse the traces of an earlier run (its traces.json)")
    p.add_argument("--costs", default=None, help="reuse the window costs of an earlier run (its costs.json)")
    p.add_argument("--cost-prompts", type=int, default=24, help="batches per batch size timed for the cost table")
    p.add_argument("--steps-per-window", type=int, default=1,
                   help="steps per window (the device loop's steps_per_sync: 4 on a GPU; 1: the host loop)")
    p.add_argument("--continuous", action="store_true",
                   help="replay as a server at each concurrency (the next request joins as soon as one finishes) "
                        "instead of in batches that run to their end")
    p.add_argument("--time-noise", type=float, default=0.0,
                   help="each window's time times exp(N(0, this)): a noisy machine (default 0: the costs exactly)")
    p.add_argument("--machine-drift", type=float, default=0.0,
                   help="... and times the machine's speed, a random walk in log with N(0, this) steps per DRIFT_GRID "
                        "seconds of the replay's clock (the same for every policy at a seed)")
    p.add_argument("--startup-noise", type=float, default=0.0,
                   help="auto's startup cost table with each (batch size, draft)'s entries times exp(N(0, this)), seeded "
                        "(--seed): the startup timing's own noise, whose errors the online refinement has to undo "
                        "(default 0: the table as measured)")
    p.add_argument("--seed", type=int, default=0,
                   help="the noise's seed (--time-noise, --machine-drift, --startup-noise): a change to the choice is "
                        "judged over several")
    p.add_argument("--output", default=None)
    args = p.parse_args(argv)

    import torch

    from dflash_trt.bench.datasets import encode_prompt, load_prompt_set
    from dflash_trt.engines.torch_engine import TorchEngine
    from dflash_trt.spec.budget import AutoBudget, CostTable, Draft

    torch.set_num_threads(args.torch_threads)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    engine = TorchEngine.from_pretrained(args.target, args.drafter, device="cpu", max_batch_size=max(sizes),
                                         max_seq_len=args.max_seq_len)
    block = engine.drafter.block_size
    prompts = [encode_prompt(engine.tokenizer, t, args.max_seq_len - args.max_new_tokens)[0]
               for t in load_prompt_set(args.dataset, args.num_prompts).turns]
    t0 = time.perf_counter()
    traces = (json.loads(Path(args.traces).read_text()) if args.traces
              else acceptance_traces(engine, prompts, args.max_new_tokens))
    print(f"traces: {len(traces)} prompts, {sum(t['tokens'] for t in traces)} tokens ({time.perf_counter() - t0:.0f} s)")

    drafts = [parse_draft(d) for d in DRAFTS]
    if args.costs:
        saved = json.loads(Path(args.costs).read_text())
        raw, startup = saved["windows"], saved["startup"]
    else:
        # "ar": plain AR (no drafter); "chain:1": auto's AR step on the drafting engine (taps kept, drafter deferred)
        raw = {}
        for size in sorted(sizes):  # windows at n = 1 from batch-1 runs (a batch's tail holds its longest, slowest requests)
            timed = measure_window_costs(engine, prompts[: args.cost_prompts * size], size, ["ar"] + list(DRAFTS),
                                         args.max_new_tokens)
            raw.update({f"{n}|{d}": s for (n, d), s in timed.items() if f"{n}|{d}" not in raw})
        engine.draft_costs = None
        engine.draft_budget("auto", block)  # the startup cost table auto works with when serving
        startup = {"|".join(map(str, key)): s for key, s in engine.draft_costs.items()}
    window, table, plain_ar, believed = cost_tables(raw, startup)
    if args.startup_noise:
        rng = random.Random(f"startup {args.seed}")
        entries = sorted({key[:2] for key in believed}, key=str)
        factor = {key: math.exp(rng.gauss(0.0, args.startup_noise)) for key in entries}
        believed = {key: s * factor[key[:2]] for key, s in believed.items()}
    report = {"date": datetime.date.today().isoformat(), "platform": platform.platform(), "torch": torch.__version__,
              "settings": vars(args), "window_costs_ms": {f"{n} {d}": s * 1e3 for (n, d), s in sorted(window.items())},
              "results": {}}
    jitter, spw = (args.time_noise, args.machine_drift, args.seed), args.steps_per_window
    for size in sizes:
        rows = {}
        tokens, seconds, _ = simulate(traces, size, Draft("chain", 1), plain_ar.cost, block, args.continuous, *jitter,
                                      steps=spw)
        rows["ar"] = (tokens / seconds, 1.0)
        for d in drafts:
            tokens, seconds, taus = simulate(traces, size, d, table.cost, block, args.continuous, *jitter, steps=spw)
            rows[str(d)] = (tokens / seconds, sum(taus) / max(len(taus), 1))
        budget = AutoBudget(block, CostTable(dict(believed)), trees=engine.auto_trees)
        tokens, seconds, taus = simulate(traces, size, budget, table.cost, block, args.continuous, *jitter, steps=spw)
        rows["auto"] = (tokens / seconds, sum(taus) / max(len(taus), 1))
        if size == 1:
            tokens, seconds = oracle(traces, table.cost, drafts, block)
            rows["oracle"] = (tokens / seconds, float("nan"))
        ar = rows["ar"][0]
        report["results"][str(size)] = {m: {"tok_s": r, "vs_ar": r / ar, "mean_tau": t} for m, (r, t) in rows.items()}
        print(f"{'concurrency' if args.continuous else 'batch'} {size}: " + "  ".join(f"{m} {r / ar:.3f}x (τ {t:.2f})" for m, (r, t) in rows.items()), flush=True)
    if args.output:
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        (out / "traces.json").write_text(json.dumps(traces) + "\n")
        (out / "costs.json").write_text(json.dumps({"windows": raw, "startup": startup}, indent=1) + "\n")
        (out / "results.json").write_text(json.dumps(report, indent=1) + "\n")
        lines = [f"# Draft budgets replayed on acceptance traces, {report['date']}", "",
                 f"`python scripts/sim_draft_budget.py {' '.join(argv if argv is not None else sys.argv[1:])}`", "",
                 f"{len(traces)} prompts, {sum(t['tokens'] for t in traces)} tokens; simulated decode time = the sum "
                 "of the measured window costs (costs.json: seconds per window by batch size and draft; its startup entry: the table auto started from); traces.json: "
                 "per prompt and position, what a chain and each tree accepts there.", "",
                 f"| {'concurrency' if args.continuous else 'batch'} | policy | vs AR | mean τ |", "|---|---|---|---|"]
        for size, res in report["results"].items():
            for mode, r in res.items():
                tau = "" if r["mean_tau"] != r["mean_tau"] else f"{r['mean_tau']:.2f}"
                lines.append(f"| {size} | {mode} | {r['vs_ar']:.3f}x | {tau} |")
        # what auto believes at start vs what the windows cost, each relative to its own K = 1 entry (the choice
        # depends only on these ratios; online refinement corrects them slowly)
        lines += ["", "Cost of each draft relative to K = 1: the startup table auto starts from (`SpecStep.measure_costs`)"
                  " / the measured windows' medians:", "",
                  "| batch | " + " | ".join(str(d) for d in drafts[1:]) + " |", "|---" * len(drafts) + "|"]
        start = CostTable(dict(believed), refine=False)  # (at its shortest cache length, as the replay prices it)
        for size in sizes:
            one = Draft("chain", 1)
            if size not in start.sizes(one) or (size, one) not in window:
                continue
            cells = [f"{start.cost(size, d) / start.cost(size, one):.2f} / {window[(size, d)] / window[(size, one)]:.2f}"
                     if size in start.sizes(d) and (size, d) in window else "-" for d in drafts[1:]]
            lines.append(f"| {size} | " + " | ".join(cells) + " |")
        (out / "README.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
