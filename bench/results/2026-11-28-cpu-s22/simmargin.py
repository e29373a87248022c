"""Twenty-second session: the twenty-first session's replay (simprior.py: s19's sim-v2 traces, this CPU's costs, AR's
scaled by AR) with a tie-break toward drafting: AR is chosen only where its priced rate beats the best drafting choice's
by more than MARGIN (a drafting window also measures; an AR window teaches nothing). MARGIN 0 = the code as it is.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s22/simmargin.py SEEDS BATCH AR MARGIN[,MARGIN...] [N]`"""
import json, sys, statistics as st, collections
sys.path.insert(0, "scripts")
from sim_draft_budget import DRAFTS, cost_tables, parse_draft, simulate
from dflash_trt.spec import budget as B
from dflash_trt.spec.budget import AutoBudget, CostTable, Draft
from pathlib import Path
SIM = Path("bench/results/2026-11-24-cpu-draft-budget-sim-v2")
traces = json.loads((SIM / "traces.json").read_text())
costs = json.loads((SIM / "costs.json").read_text())
seeds, batch, AR = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
margins = [float(m) for m in sys.argv[4].split(",")]
N = int(sys.argv[5]) if len(sys.argv) > 5 else 40
for part in ("windows", "startup"):
    costs[part] = {k: v * (AR if ("chain:1" in k or k.endswith("|ar")) else 1.0) for k, v in costs[part].items()}
_, table, plain, believed = cost_tables(costs["windows"], costs["startup"])
orig = B.AutoBudget._priced
def _priced(self, requests, left, length):
    p = orig(self, requests, left, length)
    m = getattr(self, "margin", 0.0)
    if m and p[4].size == 1 and p[5] is not None and p[3][p[5]] * (1 + m) >= p[3][p[4]]:
        p = p[:4] + (p[5],) + p[5:]
        self._pricing = (self._pricing[0], self._pricing[1], p)
    return p
B.AutoBudget._priced = _priced
tr = traces[:N]
runs = {"ar": simulate(tr, batch, Draft("chain", 1), plain.cost, 16)}
runs.update({d: simulate(tr, batch, parse_draft(d), table.cost, 16) for d in DRAFTS})
rates = {d: t / s for d, (t, s, _) in runs.items()}
best = max((d for d in rates if d != 'ar'), key=rates.get)
print(f"batch {batch} AR x{AR}:", {d: round(r / rates['ar'], 3) for d, r in rates.items()}, 'best', best)
for m in margins:
    ratios, ars = [], []
    for seed in range(seeds):
        budget = AutoBudget(16, CostTable(dict(believed)), trees=(16, 32))
        budget.margin = m
        picks = collections.Counter(); oc = budget.choose
        def choose(requests, left=None, length=None, oc=oc):
            d = oc(requests, left, length); picks[str(d)] += 1; return d
        budget.choose = choose
        t, s, tt = simulate(tr, batch, budget, table.cost, 16, noise=0.1, seed=seed)
        ratios.append(t / s / rates[best]); ars.append(picks.get("chain:1", 0))
    print(f"  margin {m}: auto / best fixed mean {st.mean(ratios):.4f} min {min(ratios):.3f}, AR windows mean "
          f"{st.mean(ars):.0f} (min {min(ars)}, max {max(ars)})", flush=True)
