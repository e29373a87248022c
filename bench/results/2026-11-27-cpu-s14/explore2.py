"""auto's drafting windows in the replay above, by kind (probe, tree measurement, on merit) and batch size >= 7: their
seconds per step and tokens per step, actual against priced, and their regret against AR (actual: the window's time
less its tokens at AR's priced rate; priced: what the choice weighed).  PYTHONPATH=<tree> python .../explore2.py 8 3"""
import collections, runpy, sys
from pathlib import Path
from dflash_trt.spec import budget as B
REPLAY = Path("bench/results/2026-11-26-cpu-draft-budget-s7/replay.py")
rows = []; pend_t = collections.deque(); pend_w = collections.deque()
oc = B.AutoBudget._choose
def _choose(self, requests, left, length):
    d = oc(self, requests, left, length)
    pr = self._pricing[2] if self._pricing else None
    if d.size > 1 and pr:
        expected, costs, now, rates, best, probe = pr
        kind = "probe" if (self._probing == d and not d.tree) else ("tree-measure" if d.tree and (self._probing == d or best != d) else "merit")
        rec = dict(n=len(requests), kind=kind, d=str(d), priced_cost=now[d] * self.cost.drift * (self.cost.probe_factor if self._probing == d else 1),
                   expected=expected[d], ar_rate=rates[Draft1] / self.cost.drift if Draft1 in rates else None, best=str(best))
        pend_t.append(rec); pend_w.append(rec)
    return d
Draft1 = B.Draft("chain", 1)
B.AutoBudget._choose = _choose
ot = B.AutoBudget.observe_time
def observe_time(self, n, draft, s, length=None):
    if draft.size > 1 and pend_t and pend_t[0]["d"] == str(draft): pend_t.popleft()["secs"] = s
    return ot(self, n, draft, s, length)
B.AutoBudget.observe_time = observe_time
ow = B.AutoBudget.observe_window
def observe_window(self, requests, draft, t, *a, **k):
    if draft.size > 1 and pend_w and pend_w[0]["d"] == str(draft):
        r = pend_w.popleft(); r["tokens"] = sum(x for q in t for x in q); r["steps"] = max(len(q) for q in t); rows.append(r)
    return ow(self, requests, draft, t, *a, **k)
B.AutoBudget.observe_window = observe_window
sys.argv = [str(REPLAY)] + sys.argv[1:]
runpy.run_path(str(REPLAY), run_name="__main__")
agg = collections.defaultdict(lambda: collections.Counter())
for r in rows:
    if "secs" not in r: continue
    key = (r["kind"], r["n"] >= 7)
    a = agg[key]; a["w"] += 1; a["secs"] += r["secs"]; a["priced"] += r["priced_cost"]; a["tok"] += r["tokens"] / r["steps"]; a["exp"] += r["expected"]
    a["real_regret"] += r["secs"] - (r["tokens"] / r["steps"]) / r["ar_rate"]; a["priced_regret"] += r["priced_cost"] - r["expected"] / r["ar_rate"]
for key, a in sorted(agg.items()):
    w = a["w"]; print(key, w, "ms/step actual %.2f priced %.2f; tokens/step actual %.1f expected %.1f; regret vs AR actual %.2f priced %.2f ms" % (
        1e3*a["secs"]/w, 1e3*a["priced"]/w, a["tok"]/w, a["exp"]/w, 1e3*a["real_regret"]/w, 1e3*a["priced_regret"]/w))
