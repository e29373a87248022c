import os, textwrap, re
os.environ["LOOP"] = "device"
exec(open("bench/results/2026-11-26-cpu-auto-overhead/insitu.py").read().split("for n in (\"choose\"")[0])
init = sm.BatchScheduler.__init__
def patched(self, *a, **kw):
    init(self, *a, **kw); self._overlap = self.spec
sm.BatchScheduler.__init__ = patched
import inspect
src = textwrap.dedent(inspect.getsource(bm.AutoBudget._count_steps))
lines = src.split("\n")
out = []
tick = 0
for i, l in enumerate(lines):
    out.append(l)
    stripped = l.strip()
    if i > 0 and stripped and not stripped.startswith("#") and not l.rstrip().endswith((":", ",", "(", "[", "\\")) and (len(l) - len(l.lstrip())) == 4 and not stripped.startswith(("return", "for", "if", "else", "elif")):
        out.append(f"    _T.append(({i}, _pc()))")
body = "\n".join(out).replace("def _count_steps(self) -> None:", "def _count_steps(self) -> None:\n    _T = TIMES.setdefault(id(self), []); _T.append((0, _pc()))", 1)
import time as _time, numpy as np
from dflash_trt.spec.budget import REQUEST_DECAY, _step_masks
g = dict(bm.__dict__); g["_pc"] = _time.perf_counter; TIMES = {}; g["TIMES"] = TIMES
exec(body, g)
bm.AutoBudget._count_steps = g["_count_steps"]
e.draft_costs = None; e.refine_draft_costs = True
for b in batches[:3]: e.generate(b, p, draft="auto")
TIMES.clear()
for b in batches[:24]: e.generate(b, p, draft="auto")
import collections
seg = collections.defaultdict(list)
for T in TIMES.values():
    for (a, ta), (b2, tb) in zip(T, T[1:]):
        if b2 > a: seg[(a, b2)].append(tb - ta)
for (a, b2), v in sorted(seg.items()):
    print(f"lines {a:2d}-{b2:2d}: median {statistics.median(v)*1e6:6.1f} us  n={len(v)}  | {lines[b2].strip()[:80]}")
