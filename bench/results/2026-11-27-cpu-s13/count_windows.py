"""The seventh session's in-process server-like replay (continuous arrivals, one long-lived scheduler per mode) with a
hook on SpecStep.launch counting auto's windows by kind and batch size: plain AR (no taps), fed AR (taps appended to
the drafter's pending context), drafting. From a tree's root:

    PYTHONPATH=<tree> python .../count_windows.py LEVELS ROUNDS"""
import collections
import runpy
import sys
from pathlib import Path

from dflash_trt.spec import step as S

REPLAY = Path(__file__).resolve().parents[1] / "2026-11-26-cpu-draft-budget-s7" / "replay.py"
counts = collections.Counter()
launch = S.SpecStep.launch


def counted(self, slots, k, spec, steps, free=(), tree=False, run=None):
    if self.drafter is not None and getattr(self, "_counting", True):
        kind = "draft" if k > 1 or tree else ("fed AR" if spec else "plain AR")
        counts[(len(slots), kind)] += 1
    return launch(self, slots, k, spec, steps, free, tree, run)


S.SpecStep.launch = counted
sys.argv = [str(REPLAY)] + sys.argv[1:]
runpy.run_path(str(REPLAY), run_name="__main__")
by = collections.defaultdict(collections.Counter)
for (n, kind), c in counts.items():
    by["n<=8" if n <= 8 else ("n 9-15" if n < 16 else "n=16")][kind] += c
for k in sorted(by):
    print(k, dict(by[k]))
