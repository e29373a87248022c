"""Why a held AR window feeds the drafter: the in-process server-like replay (../2026-11-26-cpu-draft-budget-s7/replay.py)
with a hook on AutoBudget.needs_context counting, per call, which clause holds (one request fewer drafts, the probe
near, a tree measurement near) or none ("plain").  From a tree's root: PYTHONPATH=<tree> python .../feed_why.py LEVELS ROUNDS"""
import collections, runpy, sys
from pathlib import Path
from dflash_trt.spec import budget as B
REPLAY = Path("bench/results/2026-11-26-cpu-draft-budget-s7/replay.py")
why = collections.Counter()
nc = B.AutoBudget.needs_context
def needs(self, steps=1):
    r = nc(self, steps)
    if self._last is None or self._last.size > 1 or self._probing is not None: k = "drafting"
    else:
        c = self.tree_clock
        k = "+".join(x for x, v in [("fewer", self._drafts_fewer), ("probe", self._near_probe(self._at_one, self._held_s, steps)),
                                     ("tree", self._tree_near(c.windows, c.since_s, steps))] if v) or "plain"
    why[k] += 1
    return r
B.AutoBudget.needs_context = needs
sys.argv = [str(REPLAY)] + sys.argv[1:]
runpy.run_path(str(REPLAY), run_name="__main__")
print(dict(why))
