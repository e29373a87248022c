"""The seventh session's replay.py (../../2026-11-26-cpu-draft-budget-s7/replay.py) run with two hooks: per mode (AR's
budget is a Fixed, auto's an AutoBudget) and batch size, the windows' times as the scheduler hands them to the budget
(observe_time), and the mean τ of auto's chain windows, over every round (the warm-up ones too; the copy this
replaces counted the timed rounds only: the tables in NOTES.md). From a tree's root:

    PYTHONPATH=<tree> python .../replay_timed.py LEVELS ROUNDS      (e.g. 4,8,16 2)
"""
import collections
import runpy
import statistics as st
import sys
from pathlib import Path

from dflash_trt.spec import budget as B

REPLAY = Path(__file__).resolve().parents[2] / "2026-11-26-cpu-draft-budget-s7" / "replay.py"
times = collections.defaultdict(list)  # (mode, n, draft) -> seconds per step
taus = []  # auto's chain windows' τ


def timed(cls, mode):
    f = cls.observe_time

    def g(self, n, draft, s, length=None):
        times[(mode, n, str(draft))].append(s)
        return f(self, n, draft, s, length)
    cls.observe_time = g


timed(B.Fixed, "ar")
timed(B.AutoBudget, "auto")
observe_window = B.AutoBudget.observe_window


def counted(self, requests, draft, window_taus, chain_equivalent=(), finished=()):
    if draft.size > 1 and not draft.tree:
        for t in window_taus:
            taus.extend(t)
    return observe_window(self, requests, draft, window_taus, chain_equivalent, finished)


B.AutoBudget.observe_window = counted
sys.argv = [str(REPLAY)] + sys.argv[1:]
g = runpy.run_path(str(REPLAY), run_name="__main__")
for n in (4, 8, 12, 16):
    a, b = times[("ar", n, "chain:1")], times[("auto", n, "chain:1")]
    if a and b:
        print(f"n={n} AR windows: ar {len(a)} med {st.median(a) * 1e3:.3f} mean {st.mean(a) * 1e3:.3f} | auto {len(b)} "
              f"med {st.median(b) * 1e3:.3f} mean {st.mean(b) * 1e3:.3f} sum {sum(b) * 1e3:.0f}ms; auto drafting "
              "windows: " + ", ".join(f"{d} {len(v)} x {st.mean(v) * 1e3:.2f}" for (m, k, d), v in times.items()
                                      if m == "auto" and k == n and d != "chain:1"))
for m in ("ar", "auto"):
    total = {(n, d): (len(v), round(sum(v) * 1e3)) for (mm, n, d), v in times.items() if mm == m}
    print(m, "prefill s", round(g["sch"][m].prefill_s, 3), "decode s", round(g["sch"][m].decode_s, 3), sorted(total.items()))
print("chain drafting tau", len(taus), round(st.mean(taus), 2) if taus else None)
