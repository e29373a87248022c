"""Replay (s7) with ar/auto/noexp; per engine: launch seconds by window kind and batch size, prefill seconds, windows."""
import collections, runpy, sys, time
from pathlib import Path
from dflash_trt.spec import step as S
REPLAY = Path("bench/results/2026-11-26-cpu-draft-budget-s7/replay.py")
counts = collections.Counter(); secs = collections.Counter(); names = {}
launch = S.SpecStep.launch
def counted(self, slots, k, spec, steps, free=(), tree=False, run=None):
    kind = "tree" if tree else ("draft" if k > 1 else ("fedAR" if spec else "AR"))
    t = time.perf_counter()
    r = launch(self, slots, k, spec, steps, free, tree, run)
    key = (id(self), kind, len(slots) >= 7)
    secs[key] += time.perf_counter() - t; counts[key] += 1
    return r
S.SpecStep.launch = counted
pre = S.SpecStep.prefill
def prefill(self, *a, **k):
    t = time.perf_counter(); r = pre(self, *a, **k); secs[(id(self), "prefill", None)] += time.perf_counter() - t; counts[(id(self), "prefill", None)] += 1; return r
S.SpecStep.prefill = prefill
sys.argv = [str(REPLAY)] + sys.argv[1:]
g = runpy.run_path(str(REPLAY), run_name="__main__")
for m, e in g["eng"].items():
    names[id(e.step_runner)] = m
tot = collections.Counter()
for key in sorted(counts, key=str):
    eid, kind, big = key
    m = names.get(eid, eid)
    tot[m] += secs[key]
    print(f"{m:6s} {kind:7s} n>=7={big!s:5s} windows {counts[key]:5d}  total {secs[key]:.3f} s  per {1e3*secs[key]/counts[key]:.3f} ms")
print({m: round(v, 3) for m, v in tot.items()})
