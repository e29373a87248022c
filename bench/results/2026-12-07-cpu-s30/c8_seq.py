"""A replayed server (s24's sim-fresh traces and costs, noise 0.05, continuous arrivals at concurrency C, seed): auto's
choices as a string, 50 windows a line ('.' AR, '4' / '8' / 'G' chain:4 / 8 / 16, 't' / 'T' tree:16 / 32; lowercase
and ',' where the batch is short of C), with the drafter's curve's steps and first depths and the probe interval.
It showed the curve standing at 136 steps from window ~27 to ~290 through 9 probes at C = 8 (their steps kept, not
taken in). `PYTHONPATH=CODE:. python bench/results/2026-12-07-cpu-s30/c8_seq.py C SEED`"""
import collections, json, sys
from pathlib import Path
sys.path.insert(0, "scripts")
import numpy as np
import sim_draft_budget as sim
from dflash_trt.spec.budget import AutoBudget, CostTable, AUTO_TREES, Draft
d = Path("bench/results/2026-11-28-cpu-s24/sim-fresh")
traces = json.loads((d / "traces.json").read_text())
saved = json.loads((d / "costs.json").read_text())
window, table, plain_ar, believed = sim.cost_tables(saved["windows"], saved["startup"])
C, seed = int(sys.argv[1]), int(sys.argv[2]); upto = int(sys.argv[3]) if len(sys.argv) > 3 else 400
budget = AutoBudget(16, CostTable(dict(believed)), trees=AUTO_TREES)
for a in sys.argv[4:]:
    k_, v_ = a.split("="); setattr(budget, k_, type(getattr(budget, k_))(v_))
choose = budget.choose; k = [0]; seq = []
def ch(req, left=None, length=None):
    got = choose(req, left, length)
    k[0] += 1
    s = {1: '.', 4: '4', 8: '8', 16: 'G', 2: '2', 32: 'T'}.get(got.size, '?')
    if got.tree: s = 't' if got.size == 16 else 'T'
    seq.append(s if len(req) == C else s.lower() if s != '.' else ',')
    if k[0] % 50 == 0:
        print(k[0], ''.join(seq[-50:]), "curve trials", round(float(budget.curve.trials[0]), 1), "g", np.round(budget.tables.g[:4], 3) if budget.tables.g is not None else None, "interval", budget._probe_interval)
    return got
budget.choose = ch
tok, sec, taus = sim.simulate(traces, C, budget, table.cost, 16, continuous=True, noise=0.05, seed=seed)
print("tok/s", round(tok / sec, 1))
