"""scripts/bench_draft_budget.py with auto's budget traced: the startup cost table, every pricing at batch 1 (expected
tokens and priced cost of chain:8 and tree:16, the best draft) and every batch-1 window (its draft, the expected
tokens priced for it, the realized τ, the global curve's E[τ] of chain:8, whether the request's own counts were in).

    python trace.py OUT.json [bench_draft_budget.py arguments]      (from a tree's root; PYTHONPATH=<tree>)
    python trace.py --summary OUT.json...                          prints what NOTES.md quotes
"""
import collections
import json
import runpy
import statistics as st
import sys


def trace(out, argv):
    from dflash_trt.spec import budget as B
    log, c8, t16 = [], B.Draft("chain", 8), B.Draft("tree", 16)
    measured = B.CostTable.measured.__func__

    def table(cls, seconds, refine=True):
        log.append(("table", {f"{k[0]}|{k[1]}|{k[2] if len(k) > 2 else ''}": v for k, v in seconds.items()}))
        return measured(cls, seconds, refine)

    priced = B.AutoBudget._priced

    def _priced(self, requests, left, length):
        p = priced(self, requests, left, length)
        if len(requests) == 1 and t16 in p[0]:
            log.append(("priced", p[0][c8], p[0][t16], p[2][c8], p[2][t16], str(p[4])))
        return p

    choose = B.AutoBudget.choose

    def _choose(self, requests, left=None, length=None):
        d = choose(self, requests, left, length)
        if len(requests) == 1 and self._pricing is not None:
            g = self._tables[1]
            self._traced = (d, self._pricing[2][0][d], B.AutoBudget.expected_tokens(list(g), 8) if g is not None else 0,
                            float(self._counts[self._rows.get(requests[0], 0), 1, 0]))
        return d

    window = B.AutoBudget.observe_window

    def _window(self, requests, draft, taus, chain_equivalent=(), finished=()):
        t = getattr(self, "_traced", None)
        if t is not None and len(requests) == 1 and t[0] == draft:
            log.append(("window", str(draft), t[1], taus[0][0], t[2], t[3]))
        self._traced = None
        return window(self, requests, draft, taus, chain_equivalent, finished)

    B.CostTable.measured = classmethod(table)
    B.AutoBudget._priced, B.AutoBudget.choose, B.AutoBudget.observe_window = _priced, _choose, _window
    sys.argv = ["bench_draft_budget.py"] + argv
    try:
        runpy.run_path("scripts/bench_draft_budget.py", run_name="__main__")
    finally:
        json.dump(log, open(out, "w"))


def summary(paths):
    for path in paths:
        log = json.load(open(path))
        t = next(r[1] for r in log if r[0] == "table")
        ratio = [t[f"1|tree:16|{n}"] / t[f"1|chain:8|{n}"] for n in (128, 479) if f"1|chain:8|{n}" in t]
        p = [r for r in log if r[0] == "priced"]
        half = p[len(p) // 2:]
        e = st.median(r[2] / r[1] for r in half) if half else float("nan")
        c = st.median(r[4] / r[3] for r in half) if half else float("nan")
        print(f"{path}: table tree:16 / chain:8 {' / '.join(f'{x:.3f}' for x in ratio)}; second half's pricings: "
              f"E tree:16 / chain:8 {e:.3f}, cost {c:.3f}, rate {e / c:.3f}")
        by = collections.defaultdict(list)
        for _, d, e, tau, g, own in (r for r in log if r[0] == "window"):
            by[(d, own >= 0.5)].append((e, tau, g))
        for (d, own), v in sorted(by.items()):
            print(f"  {d:9s} {'own counts' if own else 'global    '} windows {len(v):4d}  expected "
                  f"{st.mean(x[0] for x in v):.3f}  realized τ {st.mean(x[1] for x in v):.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2:])
    else:
        trace(sys.argv[1], sys.argv[2:])
