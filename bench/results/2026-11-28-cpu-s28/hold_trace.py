"""The trace that found the cause of the hold() difference: every _probe_waits call (windows held, seconds, regret,
interval, waits?) and every choose / hold, for the window-by-window and the held run of _run_held_batch.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s28/hold_trace.py STEPS SPREAD DRAFTING WINDOWS` (found with 1 inf 1.3 10)"""
import math, sys
sys.path.insert(0, "tests")
import test_budget as tb
from dflash_trt.spec import budget as B
steps, spread, drafting = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
log = []
orig_waits = B.AutoBudget._probe_waits
def waits(self, at_one, held_s, regret):
    r = orig_waits(self, at_one, held_s, regret)
    log.append(("w", at_one, round(held_s, 4), round(regret, 4), self._probe_interval, r))
    return r
B.AutoBudget._probe_waits = waits
orig_choose = B.AutoBudget.choose
def choose(self, *a, **k):
    log.append(("choose",))
    return orig_choose(self, *a, **k)
B.AutoBudget.choose = choose
orig_hold = B.AutoBudget.hold
def hold(self, *a, **k):
    log.append(("hold",))
    r = orig_hold(self, *a, **k)
    log.append(("hold->", r))
    return r
B.AutoBudget.hold = hold
orig_nc = B.AutoBudget.needs_context
res = {}
for h in (False, True):
    log.clear()
    runs, b, _ = tb._run_held_batch(steps, hold=h, probe_every=3, explore_share=tb.EXPLORE_SHARE, explore_spread=spread, drafting=drafting, windows=int(sys.argv[4]))
    res[h] = (runs, list(log))
for h in (False, True):
    runs, lg = res[h]
    print("HOLD" if h else "BYWINDOW", [(i, str(d), f) for i, (d, f) in enumerate(runs)])
    for e in lg: print("  ", e)
