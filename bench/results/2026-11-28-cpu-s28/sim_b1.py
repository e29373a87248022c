"""Batch 1 replayed (scripts/sim_draft_budget.py's simulate over s24's sim-fresh traces and costs, time noise 0.05):
per seed auto / the best fixed draft, auto's windows by draft, and what auto estimated at the end (E[τ] at the block
of chain:8, tree:16, tree:32 over every request; the tree sizes' measured steps).
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s28/sim_b1.py SEEDS [BATCH]`"""
import collections, json, sys
from pathlib import Path

sys.path.insert(0, "scripts")
import sim_draft_budget as sim
from dflash_trt.spec.budget import AutoBudget, CostTable, Draft, AUTO_TREES

d = Path("bench/results/2026-11-28-cpu-s24/sim-fresh")
traces = json.loads((d / "traces.json").read_text())
saved = json.loads((d / "costs.json").read_text())
window, table, plain_ar, believed = sim.cost_tables(saved["windows"], saved["startup"])
seeds, size = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1
block = 16
drafts = [sim.parse_draft(x) for x in sim.DRAFTS]


class Counting(AutoBudget):
    def choose(self, *a, **k):
        got = super().choose(*a, **k)
        self.counts[(len(a[0]), str(got)) if size > 1 else str(got)] += 1
        return got


ratios = []
for seed in range(1, seeds + 1):
    jitter = (0.05, 0.0, seed)
    fixed = {}
    for dr in drafts:
        tokens, seconds, _ = sim.simulate(traces, size, dr, table.cost, block, False, *jitter)
        fixed[str(dr)] = tokens / seconds
    budget = Counting(block, CostTable(dict(believed)), trees=AUTO_TREES)
    budget.counts = collections.Counter()
    tokens, seconds, taus = sim.simulate(traces, size, budget, table.cost, block, False, *jitter)
    best = max(fixed, key=fixed.get)
    r = tokens / seconds / fixed[best]
    ratios.append(r)
    e = {x: round(budget.expected_tokens(budget.acceptance(None, Draft(*x.split(":")[:1], int(x.split(":")[1]))), block), 2)
         for x in ("chain:8", "tree:16", "tree:32")}
    measured = {n: int(budget.tree_curves[n].tree.trials[0]) for n in budget.trees}
    print(f"seed {seed:2d} auto / best fixed ({best}) {r:.3f}; chose {dict(budget.counts.most_common())}; "
          f"E[τ] {e}; tree steps {measured}", flush=True)
print(f"mean {sum(ratios) / len(ratios):.4f} min {min(ratios):.3f} below 0.97: {sum(r < 0.97 for r in ratios)} of {len(ratios)}")
