"""scripts/bench_draft_budget.py at batch 1 (--modes given) with auto's choices traced: every 20th choice at one
request, the priced E / cost (ms, with the switch's extra) / rate of tree:16, tree:32 and chain:8, the cost table's
drift, switch factors and entries, the trees' measured steps, the calibration. `PYTHONPATH=CODE:. python t32_bench.py
OUT [bench args]`"""
import collections, sys
sys.path.insert(0, "scripts")
from dflash_trt.spec import budget as bm
import bench_draft_budget
out = open(sys.argv[1], "w")
t16, t32, c8 = bm.Draft("tree", 16), bm.Draft("tree", 32), bm.Draft("chain", 8)
count = collections.Counter()
_c = bm.AutoBudget.choose
def ch(self, req, left=None, length=None):
    d = _c(self, req, left, length)
    count[str(d)] += 1
    pr = self._pricing[2] if self._pricing else None
    if pr and len(req) == 1 and count.total() % 20 == 0:
        print(count.total(), str(d), "E", [round(pr[0][x], 2) for x in (t16, t32, c8)],
              "now ms", [round(pr[2][x] * 1e3, 2) for x in (t16, t32, c8)], "rate", [round(pr[3][x]) for x in (t16, t32, c8)],
              "drift", round(self.cost.drift, 3), "switch", {str(k): round(v, 2) for k, v in self.cost.switch.items()},
              "anchor", self.cost._anchor.get(1, (None,))[0], "seen", {str(k[1]): v for k, v in self.cost._seen.items() if k[0] == 1},
              "steps t16/t32", [int(self.tree_curves[s].tree.steps()) for s in (16, 32)],
              "calib", round(self.calibration.factor(t16), 3), file=out, flush=True)
    return d
bm.AutoBudget.choose = ch
bench_draft_budget.main(sys.argv[2:])
