"""The cost-side lock-in of run 20 (NOTES section 4), replayed: sim_b1.py's batch-1 replay with auto's startup table
distorted, every tree entry times SCALE (run 20's table had tree:16 at 1.47x chain:8 against 1.27x: SCALE 1.16), the
windows' true costs untouched. Prints per seed auto / best fixed and tree:16's windows. The replay has no switch cost
(a switched window costs its entry), so it shows how fast the entry is corrected where switched windows teach only
the switch factor. `PYTHONPATH=. python bench/results/2026-11-28-cpu-s28/sim_costlock.py SCALE [SEEDS]`"""
import collections, json, sys
from pathlib import Path

sys.path.insert(0, "scripts")
import sim_draft_budget as sim
from dflash_trt.spec.budget import AutoBudget, CostTable, AUTO_TREES

d = Path("bench/results/2026-11-28-cpu-s24/sim-fresh")
traces = json.loads((d / "traces.json").read_text())
saved = json.loads((d / "costs.json").read_text())
window, table, plain_ar, believed = sim.cost_tables(saved["windows"], saved["startup"])
scale, seeds = float(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 8
distorted = {k: s * (scale if k[1].tree else 1.0) for k, s in believed.items()}
fixed = {}
for dr in [sim.parse_draft(x) for x in sim.DRAFTS]:
    tokens, seconds, _ = sim.simulate(traces, 1, dr, table.cost, 16)
    fixed[str(dr)] = tokens / seconds
best = max(fixed, key=fixed.get)
ratios = []
for seed in range(1, seeds + 1):
    budget = AutoBudget(16, CostTable(dict(distorted)), trees=AUTO_TREES)
    counts = collections.Counter()
    choose = budget.choose
    budget.choose = lambda *a, **k: (lambda got: (counts.update([str(got)]), got)[1])(choose(*a, **k))
    tokens, seconds, _ = sim.simulate(traces, 1, budget, table.cost, 16, noise=0.05, seed=seed)
    ratios.append(tokens / seconds / fixed[best])
    print(f"scale {scale} seed {seed}: auto / best fixed ({best}) {ratios[-1]:.3f}, tree:16 {counts['tree:16']} "
          f"windows, chain:8 {counts['chain:8']}; tree:16 entry at the end / true "
          f"{budget.cost.cost(1, sim.parse_draft('tree:16')) / table.cost(1, sim.parse_draft('tree:16')):.3f}", flush=True)
print(f"scale {scale}: mean {sum(ratios) / len(ratios):.4f} min {min(ratios):.3f}")
