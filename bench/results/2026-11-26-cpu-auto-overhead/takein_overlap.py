import os
os.environ["LOOP"] = "device"
exec(open("bench/results/2026-11-26-cpu-auto-overhead/insitu.py").read().split("for n in (\"choose\"")[0])
init = sm.BatchScheduler.__init__
def patched(self, *a, **kw):
    init(self, *a, **kw); self._overlap = self.spec
sm.BatchScheduler.__init__ = patched
for n in ("_count_steps", "_estimates", "_depth_tables", "prepare", "choose_ahead"):
    timed(bm.AutoBudget, n)
timed(sm.BatchScheduler, "_observe")
e.draft_costs = None; e.refine_draft_costs = True  # the real table: auto free to choose
for b in batches[:3]: e.generate(b, p, draft="auto")
acc.clear()
t0 = time.perf_counter()
for b in batches[:24]: e.generate(b, p, draft="auto")
tot = time.perf_counter() - t0
w = len(acc["_observe"])
print(f"{w} windows, {tot/w*1e6:.0f} us per window")
for k, v in acc.items():
    print(f"{k:15s} calls {len(v):5d} median {statistics.median(v)*1e6:6.1f} us  per window {sum(v)/w*1e6:6.1f} us")
