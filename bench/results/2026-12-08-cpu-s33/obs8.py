"""bench with CostTable.observe at the full batch traced: draft, ms, entry, drift, residual, anchor, scale; plus auto calls. `python obs8.py OUT SIZE [bench args]`"""
import json, math, sys
sys.path.insert(0, "scripts")
from dflash_trt.spec import budget as bm
from dflash_trt.engines import torch_engine
import bench_draft_budget
out, size = open(sys.argv[1], "w"), int(sys.argv[2])
_obs = bm.CostTable.observe
def obs(self, n, k, sps, length=None, switched=False, probe=False):
    if n != size:
        return _obs(self, n, k, sps, length, switched, probe)
    entry = self._entries(n, (k,), length)[0]
    c1, c8 = self._entries(n, (bm.Draft("chain", 1), bm.Draft("chain", 8)), length)
    a = self._anchor.get(n)
    rec = dict(k=str(k), ms=round(sps * 1e3, 3), sw=switched, pr=probe, entry=round(entry * 1e3, 3), drift=round(self.drift, 4),
               res=round(math.log(sps / ((entry + self.overhead.get(n, 0.0)) * self.drift)), 3),
               over=round(self.overhead.get(n, 0.0) * 1e3, 3),
               anchor=None if a is None else [str(a[0]), a[1], round(a[2], 3), self._windows.get(n, 0) - a[3]],
               seen=self._seen.get((n, k), 0), ratio81=round(c8 / c1, 3))
    _obs(self, n, k, sps, length, switched, probe)
    rec["after"] = round(self._entries(n, (k,), length)[0] * 1e3, 3)
    out.write(json.dumps(rec) + "\n")
bm.CostTable.observe = obs
g0 = torch_engine.TorchEngine.generate
def gen(self, prompts, *a, **kw):
    out.write(json.dumps(dict(call=str(kw.get("draft", "ar" if kw.get("use_drafter") is False else None)), n=len(prompts))) + "\n")
    return g0(self, prompts, *a, **kw)
torch_engine.TorchEngine.generate = gen
def hook(cls):
    o = cls.observe_time
    def observe_time(self, n, draft, sps, length=None):
        if n == size:
            out.write(json.dumps(dict(fixed=str(draft), ms=round(sps * 1e3, 3))) + "\n")
        return o(self, n, draft, sps, length)
    cls.observe_time = observe_time
hook(bm.Fixed)
bench_draft_budget.main(sys.argv[3:])
