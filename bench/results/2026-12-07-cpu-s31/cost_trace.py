"""scripts/bench_draft_budget.py with every CostTable.observe at one request traced (JSON lines in OUT): the window's
draft, seconds per step, length, switched / probe, and the table's state before it (the draft's entry at that length,
the overhead, the drift, the anchor, the draft's windows seen), plus a mark at every auto generate() call.
`PYTHONPATH=CODE:. python cost_trace.py OUT [bench args]`"""
import json, math, sys
sys.path.insert(0, "scripts")
from dflash_trt.spec import budget as bm
from dflash_trt.engines import torch_engine
import bench_draft_budget
out = open(sys.argv[1], "w")
_obs = bm.CostTable.observe
def obs(self, n, k, sps, length=None, switched=False, probe=False):
    if n == 1:
        entry = self._entries(n, (k,), length)[0]
        a = self._anchor.get(n)
        rec = dict(k=str(k), ms=round(sps * 1e3, 4), L=length, sw=switched, pr=probe, entry=round(entry * 1e3, 4),
                   over=round(self.overhead.get(n, 0.0) * 1e3, 4), drift=round(self.drift, 4),
                   anchor=None if a is None else [str(a[0]), a[1], round(a[2], 4), a[3]],
                   seen=self._seen.get((n, k), 0), win=self._windows.get(n, 0))
        _obs(self, n, k, sps, length, switched, probe)
        rec["after"] = round(self._entries(n, (k,), length)[0] * 1e3, 4)
        out.write(json.dumps(rec) + "\n")
    else:
        _obs(self, n, k, sps, length, switched, probe)
bm.CostTable.observe = obs
_gen = torch_engine.TorchEngine.generate
def gen(self, prompts, *a, **kw):
    if kw.get("draft") == "auto":
        out.write(json.dumps({"call": len(prompts)}) + "\n")
    return _gen(self, prompts, *a, **kw)
torch_engine.TorchEngine.generate = gen
bench_draft_budget.main(sys.argv[2:])
