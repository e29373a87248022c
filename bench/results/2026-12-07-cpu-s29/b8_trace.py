"""One replay of static batches (s24's sim-fresh traces and costs, time noise 0.05, `seed`), auto's every window
printed: (window, n, draft, priced rate chain:8 / AR, priced cost chain:8 / AR, true cost chain:8 / AR, chain:8's
expected tokens per request, chain:8's calibration factor, whether the window measured a tree). Diffing two code
versions' outputs finds where their choices part (it found a measurement burst planned at a batch's last request going
on in the next batch of 8). `PYTHONPATH=CODE:. python bench/results/2026-12-07-cpu-s29/b8_trace.py BATCH SEED WINDOWS`"""
import collections, json, sys
from pathlib import Path
sys.path.insert(0, "scripts")
import sim_draft_budget as sim
from dflash_trt.spec.budget import AutoBudget, CostTable, AUTO_TREES, Draft
d = Path("bench/results/2026-11-28-cpu-s24/sim-fresh")
traces = json.loads((d / "traces.json").read_text())
saved = json.loads((d / "costs.json").read_text())
window, table, plain_ar, believed = sim.cost_tables(saved["windows"], saved["startup"])
batch, seed = int(sys.argv[1]), int(sys.argv[2])
budget = AutoBudget(16, CostTable(dict(believed)), trees=AUTO_TREES)
log = []
choose = budget.choose
c1, c8 = Draft("chain",1), Draft("chain",8)
def ch(req, left=None, length=None):
    got = choose(req, left, length)
    n = len(req)
    p = budget._pricing[2] if budget._pricing else None
    if p:
        cost = budget.cost
        log.append((len(log), n, str(got), round(p[3][c8]/p[3][c1], 3), round(p[2][c8]/p[2][c1], 3), round(table.cost(n, c8)/table.cost(n,c1), 3), round(p[0][c8]/n, 2), round(budget.calibration.factor(c8), 3), getattr(budget, "_measuring", None)))
    return got
budget.choose = ch
sim.simulate(traces, batch, budget, table.cost, 16, noise=0.05, seed=seed)
for x in log[:int(sys.argv[3])]: print(x)
