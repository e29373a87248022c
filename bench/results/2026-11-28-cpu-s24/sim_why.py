"""Twenty-fourth session: replays (scripts/sim_draft_budget.py, deterministic) on this session's traces and costs
(sim-fresh/), with auto's choices counted by batch size and kind (on merit / probe / tree measurement) and, where AR
is chosen on merit, the best drafting choice's priced rate over AR's (a histogram) and chain:8's priced τ. Optional settings of the budget
(SET="attr=value,...", set on every AutoBudget after it is made).
`[SET=...] PYTHONPATH=. python bench/results/2026-11-28-cpu-s24/sim_why.py [BATCH_SIZES=8]`"""
import collections, os, runpy, sys
import dflash_trt.spec.budget as bm

counts = collections.Counter()
ratios = collections.defaultdict(list)
taus = collections.defaultdict(list)  # n -> (chain:8's priced τ, raw τ, chains' factor, curve steps, cost ratio)
_choose = bm.AutoBudget._choose
_init = bm.AutoBudget.__post_init__
settings = [kv.split('=') for kv in os.environ.get('SET', '').split(',') if kv]


def post_init(self):
    _init(self)
    for k, v in settings:
        setattr(self, k, type(getattr(self, k))(v))


def traced(self, requests, left, length):
    d = _choose(self, requests, left, length)
    n = len(requests)
    kind = 'probe' if self._probing is not None else 'merit'
    counts[(n, str(d), kind)] += 1
    if d.size == 1 and self._pricing is not None:
        pr = self._pricing[2]
        ratios[n].append(pr[3][pr[5]] / pr[3][bm.Draft('chain', 1)])
        c8 = bm.Draft('chain', 8)
        taus[n].append((pr[0][c8] / n, pr[6][c8] / n, self.calibration.factor(c8), self.curve.steps(),
                        pr[2][c8] / pr[2][bm.Draft('chain', 1)]))
    return d


bm.AutoBudget.__post_init__ = post_init
bm.AutoBudget._choose = traced
sizes = sys.argv[1] if len(sys.argv) > 1 else '8'
d = 'bench/results/2026-11-28-cpu-s24/sim-fresh/'
sys.argv = ['sim_draft_budget.py', '--traces', d + 'traces.json', '--costs', d + 'costs.json', '--batch-sizes', sizes,
            '--continuous', '--output', '/tmp/sim-why']
try:
    runpy.run_path('scripts/sim_draft_budget.py', run_name='__main__')
except SystemExit:
    pass
for n in sorted({k[0] for k in counts}):
    row = {f"{d} {kind}": c for (m, d, kind), c in sorted(counts.items()) if m == n}
    r = sorted(ratios[n])
    q = (lambda f: round(r[int(f * (len(r) - 1))], 3)) if r else (lambda f: None)
    print(f"n={n}: {row}; AR on merit: best drafting / AR priced rate median {q(0.5)}, p10 {q(0.1)}, p90 {q(0.9)}")
for n in sorted(taus):
    t = taus[n]
    if len(t) >= 10:
        mid = sorted(t)[len(t) // 2]
        print(f"n={n}, AR on merit ({len(t)}): chain:8 priced τ median {mid[0]:.2f} (raw {mid[1]:.2f}, chains' factor "
              f"{mid[2]:.3f}, curve steps {mid[3]:.0f}, cost over AR's {mid[4]:.2f}); first {t[0][0]:.2f}, last {t[-1][0]:.2f}")
