"""Twenty-sixth session: s25's cold_c8.py (a fresh engine, a cold auto pass against AR at concurrency C), run in place,
with FEED=1: the drafter always fed (no plain AR window, no deferred prompt).
`[FEED=1] [TOKENS=64] PYTHONPATH=. python bench/results/2026-11-28-cpu-s26/cold_c8.py RUN [C=8] [MODE=auto]`"""
import os, runpy, sys
import dflash_trt.spec.budget as bm

if os.environ.get('FEED'):
    bm.AutoBudget.needs_context = lambda self, steps=1: True
    bm.AutoBudget.defers_context = lambda self, n, length=None: False
print(f"FEED={os.environ.get('FEED', '')}", flush=True)
sys.argv[0] = 'bench/results/2026-11-28-cpu-s25/cold_c8.py'
runpy.run_path(sys.argv[0], run_name='__main__')
