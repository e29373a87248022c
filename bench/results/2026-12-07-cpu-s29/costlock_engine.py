"""The cost-side lock-in of s28's run 20, in the engine: scripts/bench_draft_budget.py with auto's startup cost table
distorted, every tree entry (SpecStep.measure_costs' timings) times SCALE (run 20's table had tree:16 at 1.47x
chain:8 against 1.27x: SCALE 1.16); the fixed drafts' and the windows' true costs untouched, switch costs real.
`SCALE=1.16 PYTHONPATH=CODE:. python bench/results/2026-12-07-cpu-s29/costlock_engine.py <bench args>`"""
import os
import runpy
import sys

from dflash_trt.spec.step import SpecStep

scale = float(os.environ.get("SCALE", "1.16"))
measure = SpecStep.measure_costs


def distorted(self, *args, **kwargs):
    return {key: s * (scale if key[1].tree else 1.0) for key, s in measure(self, *args, **kwargs).items()}


SpecStep.measure_costs = distorted
sys.argv = ["scripts/bench_draft_budget.py"] + sys.argv[1:]
runpy.run_path("scripts/bench_draft_budget.py", run_name="__main__")
