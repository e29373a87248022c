"""Windows by kind and batch size, and the seconds SpecStep.launch took for each (on CPU it runs the step): the replay
above, both engines (keyed by the step's id: the AR engine's windows are all "plain AR").  PYTHONPATH=<tree> python
.../count_time.py LEVELS ROUNDS"""
import collections, runpy, sys, time
from pathlib import Path
from dflash_trt.spec import step as S
REPLAY = Path("bench/results/2026-11-26-cpu-draft-budget-s7/replay.py")
counts = collections.Counter(); secs = collections.Counter()
launch = S.SpecStep.launch
def counted(self, slots, k, spec, steps, free=(), tree=False, run=None):
    kind = (str(id(self))[-4:] + " " + ("draft" if k > 1 or tree else ("fed AR" if spec else "plain AR")))
    t = time.perf_counter()
    r = launch(self, slots, k, spec, steps, free, tree, run)
    secs[(len(slots), kind)] += time.perf_counter() - t; counts[(len(slots), kind)] += 1
    return r
S.SpecStep.launch = counted
sys.argv = [str(REPLAY)] + sys.argv[1:]
runpy.run_path(str(REPLAY), run_name="__main__")
for key in sorted(counts):
    print(key, counts[key], f"{1e3*secs[key]/counts[key]:.3f} ms")
