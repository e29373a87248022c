"""Winner's curse check on the sim-v2 traces, batch 1: the chains' calibration factor auto learns (on the windows it
chose) against chain:8's accepted / expected on every window of a fixed chain:8 run observed by the same kind of budget."""
import json, sys, statistics as st
sys.path.insert(0, "scripts")
from sim_draft_budget import cost_tables, simulate
from dflash_trt.spec.budget import AutoBudget, CostTable, Draft, Calibration
from pathlib import Path
SIM = Path("bench/results/2026-11-24-cpu-draft-budget-sim-v2")
traces = json.loads((SIM / "traces.json").read_text())[:41]
costs = json.loads((SIM / "costs.json").read_text())
AR = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
for part in ("windows", "startup"):
    costs[part] = {k: v * (1.05 if "tree" in k else AR if ("chain:1" in k or k.endswith("|ar")) else 1.0) for k, v in costs[part].items()}
_, table, plain, believed = cost_tables(costs["windows"], costs["startup"])
pairs = []
oadd = Calibration.add
def add(self, windows):
    pairs.extend((str(d), a, e) for d, a, e in windows); return oadd(self, windows)
Calibration.add = add
for seed in range(10):
    budget = AutoBudget(16, CostTable(dict(believed)), trees=(16, 32))
    simulate(traces, 1, budget, table.cost, 16, noise=0.1, seed=seed)
ch = [(a, e) for d, a, e in pairs if d.startswith('chain')]
print(f"AR x{AR}: auto's chain windows: accepted / expected drafted tokens {sum(a for a, _ in ch) / sum(e for _, e in ch):.3f} over {len(ch)}")
# unselected: an auto budget observing a fixed chain:8 run, every window paired (choose() is called for each, its choice unused)
pairs.clear()
for seed in range(3):
    budget = AutoBudget(16, CostTable(dict(believed)), trees=(16, 32))
    oc = budget.choose
    def choose(requests, left=None, length=None, oc=oc, budget=budget):
        oc(requests, left, length)
        budget._last = Draft('chain', 8); budget._probing = None
        budget._chosen[(tuple(requests), budget._last)] = budget._pricing[2][6][budget._last]
        return budget._last
    budget.choose = choose
    simulate(traces, 1, budget, table.cost, 16, noise=0.1, seed=seed)
ch = [(a, e) for d, a, e in pairs if d.startswith('chain')]
print(f"fixed chain:8, every window: accepted / expected {sum(a for a, _ in ch) / sum(e for _, e in ch):.3f} over {len(ch)}")
