"""Twenty-fourth session: the replay (sim-fresh's traces and costs, continuous, window times x exp(N(0, 0.05))) with
budget module constants set from the command line (NAME=value ...), over seeds 1..8 (SHARED=1: every replay's budget
shares the first one's drafter curve, calibration and tree counts, as one engine's schedulers do; each seed anew); prints auto / AR per seed at
c = 1 / 8 / 16 and the means. `PYTHONPATH=. python bench/results/2026-11-28-cpu-s24/sim_consts.py [NAME=value ...]`"""
import contextlib, importlib.util, io, json, statistics, sys
from pathlib import Path
import dflash_trt.spec.budget as bm

import os
for kv in sys.argv[1:]:
    k, v = kv.split('=')
    setattr(bm, k, type(getattr(bm, k))(v))
if os.environ.get('SHARED'):  # one drafter curve, calibration and tree counts for every replay (as one engine keeps)
    _auto_init = bm.AutoBudget.__init__
    kept = {}

    def shared_init(self, *a, **kw):
        _auto_init(self, *a, **kw)
        if not kept:
            kept.update(curve=self.curve, calibration=self.calibration, tree_curves=self.tree_curves,
                        tree_clock=self.tree_clock)
        else:
            _auto_init(self, *a, **kw, **kept)
    bm.AutoBudget.__init__ = shared_init
spec = importlib.util.spec_from_file_location("sim", Path("scripts/sim_draft_budget.py"))
sim = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sim)
d = 'bench/results/2026-11-28-cpu-s24/sim-fresh/'
rows = []
for seed in range(1, 9):
    if os.environ.get('SHARED'):
        kept.clear()
    with contextlib.redirect_stdout(io.StringIO()):
        sim.main(['--traces', d + 'traces.json', '--costs', d + 'costs.json', '--batch-sizes', '1,8,16',
                  '--continuous', '--time-noise', '0.05', '--seed', str(seed), '--output', '/tmp/sim-consts'])
    r = json.load(open('/tmp/sim-consts/results.json'))["results"]
    rows.append([r[s]["auto"]["vs_ar"] for s in ("1", "8", "16")])
    print(seed, " ".join(f"{x:.3f}" for x in rows[-1]), flush=True)
print(" ".join(sys.argv[1:]) or "(as is)", "means c = 1 / 8 / 16:",
      " / ".join(f"{statistics.mean(r[i] for r in rows):.3f}" for i in range(3)))
