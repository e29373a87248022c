"""auto replayed on exact acceptance traces (scripts/sim_draft_budget.py's `simulate`, the real AutoBudget of the tree
on PYTHONPATH) over a grid: three cost tables x windows of 1 and 4 steps x batch 1 / 8 / 16 x SEEDS time-noise seeds
(10 % per window). Prints auto / the best fixed draft (AR included) per cell, and the means.

    PYTHONPATH=<tree> python simgrid.py [SEEDS]        (from <tree>'s root; ~0.5 s per seed)

Cost tables, all from ../2026-11-24-cpu-draft-budget-sim-v2/costs.json (CPU window times and the startup table,
fixture pair; its traces.json are the acceptance traces):
  cpu       as measured (tree:16 / tree:32 at 1.29 / 1.51x chain:8 at batch 1)
  gpu-like  trees priced as on an H200, where a step's cost hardly depends on its width: tree:16 / tree:32 at 1.02 /
            1.06x chain:16, in the window table and in the startup table alike
  mid       tree:16 / tree:32 at 1.10 / 1.25x chain:16
"""
import json
import statistics as st
import sys
from pathlib import Path

sys.path.insert(0, "scripts")
from sim_draft_budget import DRAFTS, cost_tables, parse_draft, simulate  # noqa: E402

from dflash_trt.spec.budget import AutoBudget, CostTable, Draft  # noqa: E402

SIM = Path("bench/results/2026-11-24-cpu-draft-budget-sim-v2")
TREES = {"cpu": None, "gpu-like": (1.02, 1.06), "mid": (1.10, 1.25)}


def priced(costs, factors):
    if factors is None:
        return costs
    out = json.loads(json.dumps(costs))
    for part in out.values():  # the window table and the startup table, each against its own chain:16
        for key in part:
            for size, f in zip((16, 32), factors):
                if f"tree:{size}" in key:
                    part[key] = part[key.replace(f"tree:{size}", "chain:16")] * f
    return out


def main(seeds):
    traces = json.loads((SIM / "traces.json").read_text())
    measured = json.loads((SIM / "costs.json").read_text())
    cells, every = {}, []
    for name, factors in TREES.items():
        costs = priced(measured, factors)
        _, table, plain, startup = cost_tables(costs["windows"], costs["startup"])
        for steps in (1, 4):
            for batch in (1, 8, 16):
                runs = [simulate(traces, batch, Draft("chain", 1), plain.cost, 16, steps=steps)]
                runs += [simulate(traces, batch, parse_draft(d), table.cost, 16, steps=steps) for d in DRAFTS]
                rates = [tokens / seconds for tokens, seconds, _ in runs]
                best, ratios = max(rates), []
                for seed in range(seeds):
                    budget = AutoBudget(16, CostTable(dict(startup)), trees=(16, 32))
                    tokens, seconds, _ = simulate(traces, batch, budget, table.cost, 16, noise=0.1, seed=seed,
                                                  steps=steps)
                    ratios.append(tokens / seconds / best)
                cells[(name, steps, batch)] = st.mean(ratios)
                every += ratios
                print(f"{name:8s} w{steps} b{batch:2d}: auto / best fixed {st.mean(ratios):.3f} "
                      f"(min {min(ratios):.3f}, max {max(ratios):.3f})", flush=True)
    by = {b: st.mean(v for k, v in cells.items() if k[2] == b) for b in (1, 8, 16)}
    print(f"mean {st.mean(every):.4f}; " + " ".join(f"batch {b} {v:.4f}" for b, v in by.items()))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
