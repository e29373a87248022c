"""simgrid's replay with the H200 run's cost table (this session's run 1: n = 1, 8, 16 at 128 / 479 positions) as the
windows' costs (at 128 positions + 30 % of the way to 479: the runs' typical caches) and as auto's startup table."""
import json, re, sys, statistics as st, collections
sys.path.insert(0, "scripts")
from sim_draft_budget import DRAFTS, cost_tables, parse_draft, simulate
from dflash_trt.spec.budget import AutoBudget, CostTable, Draft
from pathlib import Path
SIM = Path("bench/results/2026-11-24-cpu-draft-budget-sim-v2")
H = json.load(open("bench/results/2026-11-27-gpu-h200-s12/run1/draft_budget/results.json"))["results"]
startup = {}
for b, r in H.items():
    for k, ms in r["cost_table_ms"].items():
        n, d, L = re.match(r"n=(\d+) (\S+) L=(\d+)", k).groups()
        if b == "16" or n != "1":
            startup[f"{n}|{d}|{L}"] = ms / 1e3
windows = {}
for key, s in startup.items():
    n, d, L = key.split("|")
    if L == "128":
        windows[f"{n}|{d}"] = s + 0.3 * (startup[f"{n}|{d}|479"] - s)
windows.update({f"{k.split('|')[0]}|ar": v for k, v in windows.items() if k.split("|")[1] == "chain:1"})
traces = json.loads((SIM / "traces.json").read_text())
_, table, plain, believed = cost_tables(windows, startup)
seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
every = []
for steps in (4, 1):
    for batch in (1, 8, 16):
        runs = {"ar": simulate(traces, batch, Draft("chain", 1), plain.cost, 16, steps=steps)}
        runs.update({d: simulate(traces, batch, parse_draft(d), table.cost, 16, steps=steps) for d in DRAFTS})
        rates = {d: t / s for d, (t, s, _) in runs.items()}
        best = max(rates, key=rates.get)
        ratios, taus = [], []
        for seed in range(seeds):
            budget = AutoBudget(16, CostTable(dict(believed)), trees=(16, 32))
            t, s, tt = simulate(traces, batch, budget, table.cost, 16, noise=0.1, seed=seed, steps=steps)
            ratios.append(t / s / rates[best]); taus.append(sum(tt) / len(tt))
        every += ratios
        print(f"h200 w{steps} b{batch:2d}: auto / best fixed ({best}, {rates[best] / rates['ar']:.2f}x AR) {st.mean(ratios):.3f} "
              f"(min {min(ratios):.3f}), auto tau {st.mean(taus):.2f} vs {best}'s {sum(runs[best][2]) / len(runs[best][2]):.2f}", flush=True)
print(f"mean {st.mean(every):.4f}")
if len(sys.argv) > 2:
    steps, batch = 4, int(sys.argv[2])
    budget = AutoBudget(16, CostTable(dict(believed)), trees=(16, 32)); log = []
    oc = budget.choose
    def choose(requests, left=None, length=None):
        d = oc(requests, left, length); log.append((len(requests), str(d))); return d
    budget.choose = choose
    simulate(traces, batch, budget, table.cost, 16, noise=0.1, seed=0, steps=steps)
    print("first 30:", [f"{n}:{d}" for n, d in log[:30]])
    print("full batch:", collections.Counter(d for n, d in log if n == batch), "all:", collections.Counter(d for n, d in log))
