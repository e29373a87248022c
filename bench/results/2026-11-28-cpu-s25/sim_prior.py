"""Twenty-fifth session: the replay (scripts/sim_draft_budget.py, continuous, window times x exp(N(0, 0.05))) over
seeds 1..8 with budget module constants from the command line (NAME=value ...), cold (a fresh budget per concurrency,
as `scripts/bench_draft_budget.py` makes a new engine per batch size) or SHARED=1 (one drafter curve, calibration and
tree counts for every concurrency, as one engine keeps). WEAK=q degrades the traces to a weaker drafter: every
continuation position is missed by the drafter with probability q (seeded), so a chain or tree accepts at most up to
the next missed position (per-depth acceptance x (1 - q)). TRACES / COSTS: directories (default s24's sim-fresh).
Prints auto / AR per seed at c = 1 / 8 / 16, then the means, and the best fixed draft's means.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s25/sim_prior.py [NAME=value ...]`"""
import contextlib, importlib.util, io, json, os, random, statistics, sys
from pathlib import Path
import dflash_trt.spec.budget as bm

fields = {}  # lower-case names: AutoBudget fields (explore_share=0.01, probe_every=...), given to every budget made
for kv in sys.argv[1:]:
    k, v = kv.split('=')
    if k.islower():
        fields[k] = type(getattr(bm.AutoBudget, k))(v)
    else:
        setattr(bm, k, type(getattr(bm, k))(v))
if fields:
    _init0 = bm.AutoBudget.__init__

    def field_init(self, *a, **kw):
        _init0(self, *a, **{**fields, **kw})
    bm.AutoBudget.__init__ = field_init
kept = {}
if os.environ.get('SHARED'):
    _auto_init = bm.AutoBudget.__init__

    def shared_init(self, *a, **kw):
        _auto_init(self, *a, **kw)
        if not kept:
            kept.update(curve=self.curve, calibration=self.calibration, tree_curves=self.tree_curves,
                        tree_clock=self.tree_clock)
        else:
            _auto_init(self, *a, **kw, **kept)
    bm.AutoBudget.__init__ = shared_init
spec = importlib.util.spec_from_file_location("sim", Path("scripts/sim_draft_budget.py"))
sim = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sim)
src = os.environ.get('TRACES', 'bench/results/2026-11-28-cpu-s24/sim-fresh')
costs = os.environ.get('COSTS', src) + '/costs.json'
traces = src + '/traces.json'
q = float(os.environ.get('WEAK', '0'))
if q:
    rng = random.Random(1234)
    tr = json.load(open(traces))
    for r in tr:
        n = len(r['chain'])
        miss = [rng.random() < q for _ in range(n + 64)]
        nxt, room = n + 64, [0] * n
        for t in range(n + 63, -1, -1):  # room[t]: drafts from anchor t that reach no missed position
            if miss[t]:
                nxt = t
            if t < n:
                room[t] = max(0, nxt - t - 1)
        r['chain'] = [min(L, room[t]) for t, L in enumerate(r['chain'])]
        for v in r['trees'].values():
            v['accepted'] = [min(a, room[t]) for t, a in enumerate(v['accepted'])]
    traces = f'/tmp/sim-weak-{q}.json'
    json.dump(tr, open(traces, 'w'))
if os.environ.get('BIAS'):  # NMIN:DRAFT:FACTOR[,...]: the startup table's entries of DRAFT at n >= NMIN x FACTOR (a
    # mis-timed startup table: the truth, the replay's window costs, stays)
    saved = json.load(open(costs))
    for spec_ in os.environ['BIAS'].split(','):
        nmin, kind, size, factor = spec_.split(':')
        for key in saved['startup']:
            n, d, *_ = key.split('|')
            if int(n) >= int(nmin) and d == f'{kind}:{size}':
                saved['startup'][key] *= float(factor)
    costs = '/tmp/sim-bias-costs.json'
    json.dump(saved, open(costs, 'w'))
rows, best = [], []
for seed in range(1, 9):
    kept.clear()
    with contextlib.redirect_stdout(io.StringIO()):
        sim.main(['--traces', traces, '--costs', costs, '--batch-sizes', '1,8,16',
                  '--continuous', '--time-noise', '0.05', '--seed', str(seed), '--output', '/tmp/sim-prior'])
    r = json.load(open('/tmp/sim-prior/results.json'))["results"]
    rows.append([r[s]["auto"]["vs_ar"] for s in ("1", "8", "16")])
    best.append([max(v["vs_ar"] for k, v in r[s].items() if k not in ("auto", "oracle") and isinstance(v, dict)
                     and "vs_ar" in v) for s in ("1", "8", "16")])
    print(seed, " ".join(f"{x:.3f}" for x in rows[-1]), flush=True)
m = lambda a, i: statistics.mean(x[i] for x in a)
print(" ".join(sys.argv[1:]) or "(as is)", f"SHARED={os.environ.get('SHARED', '')} WEAK={q} BIAS={os.environ.get('BIAS', '')}", "auto means c = 1 / 8 / 16:",
      " / ".join(f"{m(rows, i):.3f}" for i in range(3)), "| best fixed:", " / ".join(f"{m(best, i):.3f}" for i in range(3)))
