"""Twenty-second session: the windows of the in-process replay (replay.py here) by engine, batch size and kind, with
what SpecStep.launch took for each (on the CPU it runs the window's steps). Kinds: a budget's choice as choose() made it
— "probe" (a drafting window of an AR stretch), "tree measurement" (a tree size not measured enough), "draft on
merit", "AR on merit" (fed: its steps' taps go to the drafter's pending context; plain: they do not) — and "held" for
windows run with no call to choose() (AutoBudget.hold), "last" for a request's last token (choose() returns AR before
pricing). The AR engine's windows are all "plain AR". Engines are named by the order they were made (replay.py makes
them in its modes' order: ar, auto, then noexp / shrink / c8 as named).
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s22/count_kinds.py LEVELS ROUNDS [replay.py's modes]`"""
import collections, runpy, sys, time
from pathlib import Path
from dflash_trt.spec import budget as B
from dflash_trt.spec import step as S
REPLAY = Path(__file__).with_name("replay.py")
counts, secs, names, last = collections.Counter(), collections.Counter(), {}, {"kind": None}
choose = B.AutoBudget.choose
def chosen(self, requests, left=None, length=None):
    d = choose(self, requests, left, length)
    if left is not None and max(left) <= 1:
        last["kind"] = "last"
    elif self._probing is not None:
        last["kind"] = "probe"  # (a tree measurement in an AR stretch is one too: _choose)
    elif d.tree and d.size in self._sizes and self.tree_curves[d.size].tree.steps() < B.TREE_MEASURE_STEPS:
        last["kind"] = "tree measurement"
    else:
        last["kind"] = "draft on merit" if d.size > 1 else "AR on merit"
    return d
B.AutoBudget.choose = chosen
launch = S.SpecStep.launch
def counted(self, slots, k, spec, steps, free=(), tree=False, run=None):
    engine = names.setdefault(id(self), f"engine {len(names)}")
    kind = last["kind"] or "held"
    if engine == "engine 0":
        kind = "plain AR"
    elif kind == "AR on merit" or (kind == "held" and k == 1 and not tree):
        kind += " fed" if spec else " plain"
    last["kind"] = None
    t = time.perf_counter()
    r = launch(self, slots, k, spec, steps, free, tree, run)
    secs[(engine, len(slots), kind)] += time.perf_counter() - t; counts[(engine, len(slots), kind)] += 1
    return r
S.SpecStep.launch = counted
sys.argv = [str(REPLAY)] + sys.argv[1:]
runpy.run_path(str(REPLAY), run_name="__main__")
for key in sorted(counts):
    print(key, counts[key], f"{1e3 * secs[key] / counts[key]:.3f} ms, {secs[key]:.3f} s")
