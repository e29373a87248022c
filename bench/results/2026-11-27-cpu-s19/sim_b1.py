"""Replay at batch 1 with this CPU's costs (sim-v2): auto / best fixed and auto's tree share per seed.
`sim_b1.py SEEDS BATCH STEPS TREE [AR]` from the repository root: trees' costs scaled by TREE, AR's by AR (the twentieth
session: its VM timed AR ~20 % cheaper against the drafts than the traces' machine)."""
import json, sys, statistics as st, collections
sys.path.insert(0, "scripts")
from sim_draft_budget import DRAFTS, cost_tables, parse_draft, simulate
from dflash_trt.spec.budget import AutoBudget, CostTable, Draft
from pathlib import Path
SIM = Path("bench/results/2026-11-24-cpu-draft-budget-sim-v2")
traces = json.loads((SIM / "traces.json").read_text())
costs = json.loads((SIM / "costs.json").read_text())
TREE = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0  # tree entries scaled (today's CPU: trees ~4 % dearer)
AR = float(sys.argv[5]) if len(sys.argv) > 5 else 1.0  # AR's entries scaled
for part in ("windows", "startup"):
    costs[part] = {k: v * (TREE if "tree" in k else AR if ("chain:1" in k or k.endswith("|ar")) else 1.0)
                   for k, v in costs[part].items()}
_, table, plain, believed = cost_tables(costs["windows"], costs["startup"])
seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 1
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 1
runs = {"ar": simulate(traces, batch, Draft("chain", 1), plain.cost, 16, steps=steps)}
runs.update({d: simulate(traces, batch, parse_draft(d), table.cost, 16, steps=steps) for d in DRAFTS})
rates = {d: t / s for d, (t, s, _) in runs.items()}
best = max((d for d in rates if d != 'ar'), key=rates.get)
print({d: round(r / rates['ar'], 3) for d, r in rates.items()}, 'best', best)
ratios = []
for seed in range(seeds):
    budget = AutoBudget(16, CostTable(dict(believed)), trees=(16, 32))
    picks = collections.Counter()
    oc = budget.choose
    def choose(requests, left=None, length=None, oc=oc):
        d = oc(requests, left, length); picks[str(d)] += 1; return d
    budget.choose = choose
    t, s, tt = simulate(traces, batch, budget, table.cost, 16, noise=0.1, seed=seed, steps=steps)
    ratios.append(t / s / rates[best])
    print(seed, round(ratios[-1], 3), dict(picks), 'cal', round(budget.calibration.factor(Draft('chain', 8)), 3), round(budget.calibration.factor(Draft('tree', 16)), 3), flush=True)
print('mean', round(st.mean(ratios), 4), 'min', round(min(ratios), 3))
