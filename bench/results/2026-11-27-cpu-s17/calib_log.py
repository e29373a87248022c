"""replay_delay.py with each drafting window's calibration pair logged (accepted / expected drafted tokens by batch size
and draft). `calib_log.py 4 3 profile delay=0.001`."""
import sys, runpy, collections
from dflash_trt.spec import budget as B
log = []
orig_ow = B.AutoBudget.observe_window
def ow(self, requests, draft, taus, chain_equivalent=(), finished=()):
    key = (tuple(requests), draft)
    exp = self._chosen.get(key) if draft.size > 1 else None
    if exp is not None and not any(finished) and all(taus):
        n = len(requests); acc = sum(sum(t) / len(t) for t in taus)
        log.append((n, str(draft), str(self._observed), acc - n, exp - n))
    return orig_ow(self, requests, draft, taus, chain_equivalent, finished)
B.AutoBudget.observe_window = ow
sys.argv = ["replay_delay.py"] + sys.argv[1:]
try:
    runpy.run_path("bench/results/2026-11-27-cpu-s17/replay_delay.py", run_name="__main__")
finally:
    by = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for n, d, prev, a, e in log:
        k = (n, d, "after AR" if prev == "chain:1" else "after draft")
        by[k][0] += 1; by[k][1] += a; by[k][2] += e
    for k, (c, a, e) in sorted(by.items()):
        print(k, c, "accepted/expected", round(a / e, 3) if e else None)
