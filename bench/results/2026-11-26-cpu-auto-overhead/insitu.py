import time, statistics, collections
exec(open("bench/results/2026-11-26-cpu-auto-overhead/overhead.py").read().split("for b in batches[:3]:")[0])
from dflash_trt.engines import scheduler as sm
sm.BatchScheduler._decode = D0
acc = collections.defaultdict(list)
def timed(cls, name):
    f = getattr(cls, name)
    def g(*a, **k):
        t = time.perf_counter()
        try: return f(*a, **k)
        finally: acc[name].append(time.perf_counter() - t)
    setattr(cls, name, g)
for n in ("choose", "observe_time", "observe_window", "prepare", "_take_in"):
    timed(bm.AutoBudget, n)
timed(sm.BatchScheduler, "_observe")
for b in batches[:3]: e.generate(b, p, draft="auto")
acc.clear()
t0 = time.perf_counter()
for b in batches[:24]: e.generate(b, p, draft="auto")
tot = time.perf_counter() - t0
w = len(acc["choose"])
print(f"{w} windows, {tot/w*1e6:.0f} us per window")
for k, v in acc.items():
    print(f"{k:15s} calls {len(v):5d} median {statistics.median(v)*1e6:6.1f} us  mean {statistics.mean(v)*1e6:6.1f} us  per window {sum(v)/w*1e6:6.1f} us")
