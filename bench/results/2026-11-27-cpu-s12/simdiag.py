"""simgrid's gpu-like (or other) cell: auto's choices window by window, and its loss split by phase."""
import json, sys, collections
sys.path.insert(0, "scripts"); sys.path.insert(0, "bench/results/2026-11-26-cpu-draft-budget-s10")
from sim_draft_budget import DRAFTS, cost_tables, parse_draft, simulate
from simgrid import SIM, TREES, priced
from dflash_trt.spec.budget import AutoBudget, CostTable, Draft
name, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
traces = json.loads((SIM / "traces.json").read_text()); measured = json.loads((SIM / "costs.json").read_text())
costs = priced(measured, TREES[name]); _, table, plain, startup = cost_tables(costs["windows"], costs["startup"])
runs = {d: simulate(traces, batch, parse_draft(d), table.cost, 16, steps=steps) for d in DRAFTS}
for d, (tok, sec, taus) in runs.items():
    print(f"{d}: {tok / sec:.1f} tok/s, tau {sum(taus) / len(taus):.2f}")
budget = AutoBudget(16, CostTable(dict(startup)), trees=(16, 32))
log = []
oc = budget.choose
def choose(requests, left=None, length=None):
    d = oc(requests, left, length); log.append((len(requests), str(d))); return d
budget.choose = choose
tok, sec, taus = simulate(traces, batch, budget, table.cost, 16, noise=0.1, seed=0, steps=steps)
print(f"auto: {tok / sec:.1f} tok/s, tau {sum(taus) / len(taus):.2f}, windows {len(log)}")
print("first 40 choices:", [f"{n}:{d}" for n, d in log[:40]])
print("counts:", collections.Counter(d for n, d in log))
print("at full batch:", collections.Counter(d for n, d in log if n == batch))
