"""How well auto's expected tokens match what the drafts accept, on exact acceptance traces, batch 1: every step, the
E[τ] auto prices for chain:8, tree:16 and tree:32 (its estimates as they stand then) against what each would accept
at that position (from the traces: no selection by the choice), while the windows run FORCE (a draft, or auto's own
choice) and teach the estimates as in a run. COSTS: the startup table auto chooses with, one of simgrid.py's (cpu,
the default; gpu-like; mid).

    PYTHONPATH=<tree> python calib.py FORCE [COSTS]        (from <tree>'s root)
"""
import json
import statistics as st
import sys
from pathlib import Path

sys.path.insert(0, "scripts")
from sim_draft_budget import cost_tables, parse_draft  # noqa: E402
from simgrid import TREES, priced  # noqa: E402  (this folder's)

from dflash_trt.spec.budget import AutoBudget, CostTable, Draft  # noqa: E402

SIM = Path("bench/results/2026-11-24-cpu-draft-budget-sim-v2")
DRAFTS = (Draft("chain", 8), Draft("tree", 16), Draft("tree", 32))


def main(force, costs="cpu"):
    traces = json.loads((SIM / "traces.json").read_text())
    saved = priced(json.loads((SIM / "costs.json").read_text()), TREES[costs])
    budget = AutoBudget(16, CostTable(cost_tables(saved["windows"], saved["startup"])[3], refine=False), trees=(16, 32))
    rows = []
    for rid, trace in enumerate(traces):
        produced = 1
        while produced < trace["tokens"]:
            t, left = produced - 1, trace["tokens"] - produced
            d = budget.choose([rid], [left])
            expected = budget._pricing[2][0]
            chain = trace["chain"][t] if t < len(trace["chain"]) else 0
            rows.append([expected[DRAFTS[0]], min(min(chain, 7) + 1, left)]
                        + [x for size in (16, 32) for x in (expected[Draft("tree", size)],
                                                           min(trace["trees"][str(size)]["accepted"][t] + 1, left))])
            d = d if force == "auto" else parse_draft(force)
            if d.tree:
                tree = trace["trees"][str(d.size)]
                depth = tree["chain_depth"][t]
                tau, chains = tree["accepted"][t] + 1, [[(depth + 1, min(chain, depth) + 1)]]
            else:
                tau, chains = min(chain, d.size - 1) + 1, ()
            produced += min(tau, left)
            budget.observe_window([rid], d, [[tau]], chains, [produced >= trace["tokens"]])
            budget.observe_time(1, d, 0.005)
            budget.prepare()
        budget.forget(rid)
    n = len(rows)
    for name, part in (("all", rows), ("first quarter", rows[: n // 4]), ("second half", rows[n // 2:])):
        e8, r8, e16, r16, e32, r32 = (st.mean(r[i] for r in part) for i in range(6))
        print(f"{force:8s} {name:13s} steps {len(part):5d}  E / accepted: chain:8 {e8:.2f} / {r8:.2f} ({e8 / r8:.3f})  "
              f"tree:16 {e16:.2f} / {r16:.2f} ({e16 / r16:.3f})  tree:32 {e32:.2f} / {r32:.2f} ({e32 / r32:.3f})")


if __name__ == "__main__":
    main(*sys.argv[1:])
