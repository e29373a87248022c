"""bench with auto's pricing at the full batch logged (JSON lines in OUT), every window's time, the drafts' tokens (auto and fixed) and the generate() calls. `PYTHONPATH=CODE:. python price8.py OUT SIZE [bench args]`"""
import json, sys
sys.path.insert(0, "scripts")
from dflash_trt.spec import budget as bm
import bench_draft_budget
out, size = open(sys.argv[1], "w"), int(sys.argv[2])
orig = bm.AutoBudget._priced
def _priced(self, requests, left, length):
    p = orig(self, requests, left, length)
    if len(requests) == size:
        expected, costs, now, rates, best, best_drafting, raw = p
        sel = [d for d in self.drafts if str(d) in ("chain:1", "chain:4", "chain:8", "chain:16", "tree:16")]
        out.write(json.dumps(dict(ev="price", L=length, best=str(best), e={str(d): round(expected[d], 2) for d in sel},
                                  raw={str(d): round(raw[d], 2) for d in sel},
                                  c={str(d): round(costs[d] * 1e3, 2) for d in sel},
                                  r={str(d): round(rates[d] / 1e3, 3) for d in sel})) + "\n")
    return p
bm.AutoBudget._priced = _priced
def hook(cls, kind):
    o = cls.observe_time
    def observe_time(self, n, draft, sps, length=None):
        if n == size:
            out.write(json.dumps(dict(ev="time", kind=kind, d=str(draft), ms=round(sps * 1e3, 3))) + "\n")
        return o(self, n, draft, sps, length)
    cls.observe_time = observe_time
hook(bm.AutoBudget, "auto"); hook(bm.Fixed, "fixed")
def hook_window(cls, ev):
    o = cls.observe_window
    def observe_window(self, requests, draft, taus, *a, **kw):
        if len(requests) == size:
            out.write(json.dumps(dict(ev=ev, d=str(draft), taus=[list(t) for t in taus])) + "\n")
        return o(self, requests, draft, taus, *a, **kw)
    cls.observe_window = observe_window
hook_window(bm.AutoBudget, "taus"); hook_window(bm.Fixed, "ftaus")
from dflash_trt.engines import torch_engine
g0 = torch_engine.TorchEngine.generate
def gen(self, prompts, *a, **kw):
    out.write(json.dumps(dict(ev="call", draft=str(kw.get("draft")), n=len(prompts), p0=str(prompts[0][:6]))) + "\n")
    return g0(self, prompts, *a, **kw)
torch_engine.TorchEngine.generate = gen
bench_draft_budget.main(sys.argv[3:])
