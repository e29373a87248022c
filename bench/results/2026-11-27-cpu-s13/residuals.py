"""What auto's cost table said a window would cost against what it took, in the real engine (this CPU): every
CostTable.observe call of a bench_draft_budget.py run logged, split into entries the table was timed at and entries it
interpolated (a batch size between the measured ones). Ratio = took / (entry x drift), before the update; for the
interpolated ones, also at their first window (before any update of theirs).

    python bench/results/2026-11-27-cpu-s13/residuals.py [bench_draft_budget.py args]"""
import collections
import statistics as st
import sys

sys.path.insert(0, "scripts")
import bench_draft_budget  # noqa: E402

from dflash_trt.spec import budget  # noqa: E402

log = []
orig = budget.CostTable.observe


def observe(self, n, k, seconds_per_step, length=None, switched=False):
    if self.refine and seconds_per_step > 0 and not switched:
        measured = n in self.sizes(k) and (n, k) not in getattr(self, "_guessed", {}) and not getattr(self, "_made", set()) >= {(n, k)}
        made = getattr(self, "_made", None)
        if made is None:
            made = self._made = set()
        first = n not in self.sizes(k)
        if first:
            made.add((n, k))
        priced = self.cost(n, k, length) * self.drift if not first else self._over_n(n, k, self.lengths[0]) * self.drift
        if first and length is not None and len(self.lengths) > 1:
            priced = None
        log.append((n, str(k), (n, k) in made, first, seconds_per_step, priced))
    return orig(self, n, k, seconds_per_step, length, switched)


budget.CostTable.observe = observe
try:
    bench_draft_budget.main(sys.argv[1:])
finally:
    groups = collections.defaultdict(list)
    firsts = collections.defaultdict(list)
    for n, k, made, first, s, priced in log:
        if priced is None:
            continue
        groups[("interpolated" if made else "measured", k)].append(s / priced)
        if first:
            firsts[k].append(s / priced)
    print("\nwindow time / (entry x drift), by the entry's origin and draft: median (windows)")
    for key in sorted(groups):
        v = groups[key]
        print(f"  {key[0]:12s} {key[1]:9s} {st.median(v):.3f} ({len(v)})")
    by_n = collections.defaultdict(list)
    for n, k, made, first, s, priced in log:
        if priced is not None and k != "chain:1":
            by_n[(n, made)].append(s / priced)
    print("drafting windows by batch size: median ratio (windows)")
    for key in sorted(by_n):
        print(f"  n={key[0]:2d} {'interp' if key[1] else 'timed '} {st.median(by_n[key]):.3f} ({len(by_n[key])})")
