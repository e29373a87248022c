"""hold() against window-by-window choice over a grid (tests/test_budget.py _run_held_batch): windows of 1/2/4/8 steps,
spread inf/0.5/0.25, explore_share 0.02/0.05/1, drafting at 1.1-5.0 AR windows; prints every setting that differs
(drafts and feeds, decision state, counts, fades) and how many windows were chosen. `PYTHONPATH=. python
bench/results/2026-11-28-cpu-s28/hold_grid.py`"""
import math, sys
import numpy as np
sys.path.insert(0, "tests")
from test_budget import _run_held_batch, EXPLORE_SHARE
from dflash_trt.spec.budget import EXPLORE_SPREAD
bad = 0
for steps in (1, 2, 4, 8):
    for spread in (math.inf, EXPLORE_SPREAD, 0.25):
        for share in (EXPLORE_SHARE, 0.05, 1.0):
            for drafting in (1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 2.0, 3.0, 5.0):
                a, ra, ca = _run_held_batch(steps, hold=False, probe_every=3, explore_share=share, explore_spread=spread, drafting=drafting, windows=1500)
                b, rb, cb = _run_held_batch(steps, hold=True, probe_every=3, explore_share=share, explore_spread=spread, drafting=drafting, windows=1500)
                ok = a == b and ra._decision() == rb._decision() and np.array_equal(ra._counts, rb._counts) and ra._faded == rb._faded
                if not ok:
                    bad += 1
                    print("DIFF", steps, spread, share, drafting, [i for i in range(len(a)) if a[i] != b[i]][:5])
                print(steps, spread, share, drafting, "chosen", cb, "of", len(b), "drafted", sum(d.size > 1 for d, _ in b), flush=True)
print("bad", bad)
