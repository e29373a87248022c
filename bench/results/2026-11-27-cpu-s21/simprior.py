"""Twenty-first session: s19's sim_b1 replay (sim-v2 traces, this CPU's costs, AR's scaled by AR) with auto's prior the
drafter's measured curve (counted on traces[40:80], every anchor) against the default 0.7, on the first N traces.
`PYTHONPATH=. python bench/results/2026-11-27-cpu-s21/simprior.py SEEDS BATCH [AR] [N]` from the repository root."""
import json, sys, statistics as st, collections
import numpy as np
sys.path.insert(0, "scripts")
from sim_draft_budget import DRAFTS, cost_tables, parse_draft, simulate
from dflash_trt.spec.budget import AutoBudget, CostTable, Draft
from pathlib import Path
SIM = Path("bench/results/2026-11-24-cpu-draft-budget-sim-v2")
traces = json.loads((SIM / "traces.json").read_text())
costs = json.loads((SIM / "costs.json").read_text())
AR = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
N = int(sys.argv[4]) if len(sys.argv) > 4 else 40
for part in ("windows", "startup"):
    costs[part] = {k: v * (AR if ("chain:1" in k or k.endswith("|ar")) else 1.0) for k, v in costs[part].items()}
_, table, plain, believed = cost_tables(costs["windows"], costs["startup"])
acc = np.zeros(15); tri = np.zeros(15)
for t in traces[40:80]:
    for a in t["chain"]:
        a = min(a, 15)
        acc[:a] += 1; tri[:min(a + 1, 15)] += 1
curve = list(np.clip(acc / tri, 0.05, 0.95))
print("curve", [round(c, 3) for c in curve])
seeds = int(sys.argv[1]); batch = int(sys.argv[2])
tr = traces[:N]
runs = {"ar": simulate(tr, batch, Draft("chain", 1), plain.cost, 16)}
runs.update({d: simulate(tr, batch, parse_draft(d), table.cost, 16) for d in DRAFTS})
rates = {d: t / s for d, (t, s, _) in runs.items()}
best = max((d for d in rates if d != 'ar'), key=rates.get)
print({d: round(r / rates['ar'], 3) for d, r in rates.items()}, 'best', best)
for name, prior in (("0.7", None), ("measured", curve)):
    ratios = []; ars = []
    for seed in range(seeds):
        budget = AutoBudget(16, CostTable(dict(believed)), trees=(16, 32), prior=prior)
        picks = collections.Counter(); oc = budget.choose
        def choose(requests, left=None, length=None, oc=oc):
            d = oc(requests, left, length); picks[str(d)] += 1; return d
        budget.choose = choose
        t, s, tt = simulate(tr, batch, budget, table.cost, 16, noise=0.1, seed=seed)
        ratios.append(t / s / rates[best]); ars.append(picks.get("chain:1", 0))
    print(name, 'mean', round(st.mean(ratios), 4), 'min', round(min(ratios), 3), 'AR windows', ars, flush=True)
