# why.py BENCH_ARGS: scripts/bench_draft_budget.py with, per held AR window of auto, which rule made it feed the drafter
# (one request fewer drafts, near probe, near tree measurement) and the probe interval; run from a tree root with PYTHONPATH=<tree>
import sys, collections
sys.path.insert(0, "scripts")
from dflash_trt.spec import budget as B
cnt = collections.Counter()
orig = B.AutoBudget.needs_context
def nc(self, steps=1):
    r = orig(self, steps)
    if self._last is not None and self._last.size == 1 and self._probing is None:
        c = self.tree_clock
        cnt[(len(self._pricing[0][0][0]) if self._pricing else None, self._drafts_fewer, self._near_probe(self._at_one, steps),
             self._tree_near(c.windows, c.since_s, steps), self._probe_interval)] += 1
    return r
B.AutoBudget.needs_context = nc
import bench_draft_budget as bd
bd.main(sys.argv[1:])
for k in sorted(cnt, key=str): print("n, fewer, near_probe, tree_near, interval", k, cnt[k])
