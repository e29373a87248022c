"""Twenty-fourth session: at the replay's AR choices at N requests (continuous, sim-fresh's traces and costs), each
held request's estimate of chain:8's τ (AutoBudget.acceptance: its own counts shrunk toward the drafter's curve; no
calibration, no optimism) against the truth at its position in its trace (min(L(t), 7) + 1) — splitting auto's gap
into the estimate's error and the selection of where it holds AR — and the same at its chain:8 choices.
`PYTHONPATH=. python bench/results/2026-11-28-cpu-s24/sim_split.py [N=8] [SEED=0]`"""
import collections, importlib.util, statistics, sys
from pathlib import Path
import dflash_trt.spec.budget as bm

N = int(sys.argv[1]) if len(sys.argv) > 1 else 8
SEED = sys.argv[2] if len(sys.argv) > 2 else '0'
spec = importlib.util.spec_from_file_location("sim", Path("scripts/sim_draft_budget.py"))
sim = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sim)
walks = {}
_init = sim.Walk.__init__


def init(self, rid, trace, block_size):
    _init(self, rid, trace, block_size)
    walks[rid] = self


sim.Walk.__init__ = init
seen = collections.defaultdict(list)  # (n, chosen) -> [(estimate, truth)]
_choose = bm.AutoBudget.choose
c8 = bm.Draft('chain', 8)
curve_at = [None, None, None]


def choose(self, requests, left=None, length=None):
    d = _choose(self, requests, left, length)
    if len(requests) == N and self._probing is None:
        for r in requests:
            w = walks[r]
            t = w.produced - 1
            chain = w.trace["chain"][t] if t < len(w.trace["chain"]) else 0
            est = self.expected_tokens(self.acceptance(r, c8), 8)
            seen[str(d)].append((est, min(chain, 7) + 1))
        if d.size == 1:
            curve_at[:] = [self.acceptance(None, bm.Draft('chain', 16)), self.curve.steps(), list(self.curve.trials)]
    return d


bm.AutoBudget.choose = choose
d = 'bench/results/2026-11-28-cpu-s24/sim-fresh/'
sim.main(['--traces', d + 'traces.json', '--costs', d + 'costs.json', '--batch-sizes', str(N), '--continuous',
          '--time-noise', '0.05' if SEED != '0' else '0', '--seed', SEED, '--output', '/tmp/sim-split'])
for chosen, pairs in sorted(seen.items()):
    est = statistics.mean(e for e, _ in pairs)
    truth = statistics.mean(t for _, t in pairs)
    print(f"n={N} chose {chosen}: {len(pairs)} request-windows, chain:8 τ estimated {est:.2f}, true at those positions "
          f"{truth:.2f}")
# the drafter's curve (as the last AR choice at N saw it) against the traces' own per-depth acceptance over every
# position: P(L >= j + 1 | L >= j)
import json
traces = json.load(open(d + 'traces.json'))
traces = traces["traces"] if isinstance(traces, dict) and "traces" in traces else traces
ls = [min(c, 15) for t in traces for c in t["chain"]]
true_p = [sum(l >= j + 1 for l in ls) / max(sum(l >= j for l in ls), 1) for j in range(8)]
print("traces' p_j (j = 0..7):", " ".join(f"{p:.2f}" for p in true_p),
      f"-> chain:8 τ {bm.AutoBudget.expected_tokens(true_p[:7], 8):.2f}")
print("curve at the last AR choice:", " ".join(f"{p:.2f}" for p in curve_at[0][:8]), f"(steps {curve_at[1]:.0f}, "
      f"trials by depth {' '.join(f'{x:.0f}' for x in curve_at[2][:8])}) -> chain:8 τ "
      f"{bm.AutoBudget.expected_tokens(curve_at[0][:7], 8):.2f}")
