"""scripts/bench_draft_budget.py with auto's budget calls timed (outermost AutoBudget calls): what the budget costs per
window inside the bench's interleaved runs. `bench_budget_time.py [bench args...]`"""
import collections, runpy, sys, time
from dflash_trt.spec import budget as B
acc, calls, depth = collections.Counter(), collections.Counter(), [0]
for name in ["choose", "choose_ahead", "commit_ahead", "hold", "held", "needs_context", "defers_context",
             "observe_window", "observe_time", "prepare", "forget"]:
    f = getattr(B.AutoBudget, name)
    def g(self, *a, _f=f, _n=name, **k):
        depth[0] += 1; t = time.perf_counter()
        try: return _f(self, *a, **k)
        finally:
            depth[0] -= 1
            if depth[0] == 0: acc[_n] += time.perf_counter() - t; calls[_n] += 1
    setattr(B.AutoBudget, name, g)
sys.argv = ["bench_draft_budget.py"] + sys.argv[1:]
try:
    runpy.run_path("scripts/bench_draft_budget.py", run_name="__main__")
finally:
    w = calls["observe_time"] or 1
    print(f"auto's budget: {1e6 * sum(acc.values()) / w:.1f} us per observed window over {w} (warm-up included):",
          {k: round(1e6 * v / w, 1) for k, v in acc.most_common()})
