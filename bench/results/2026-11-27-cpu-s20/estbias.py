"""Offline, on the sim-v2 acceptance traces (scripts/sim_draft_budget.Walk): the raw (uncalibrated) estimates of
chain:8 and tree:16 against what each would accept at the same anchor, while the fixed draft RUN runs (batch 1, the
first 40 prompts after the warm-up one, take-in every REFRESH_STEPS steps and at each request's end), over all windows
and per ten prompts ("global": the curve's estimate alone, no per-request counts); then the drafter's curve, tree:16's
miss factors and its paired counts against the truth over the same anchors (the traces know the chain's acceptance at
every anchor). From the repository root: `python bench/results/2026-11-27-cpu-s20/estbias.py RUN`; with SHUFFLE=SEED
in the environment the 80 traces are shuffled first (another 40 prompts, in another order)."""
import json, sys, statistics as st, copy
sys.path.insert(0, "scripts")
from sim_draft_budget import Walk
from dflash_trt.spec import budget as B
from pathlib import Path
SIM = Path("bench/results/2026-11-24-cpu-draft-budget-sim-v2")
traces = json.loads((SIM / "traces.json").read_text())
import random, os
if os.environ.get("SHUFFLE"): random.Random(int(os.environ["SHUFFLE"])).shuffle(traces)
run = B.Draft(*sys.argv[1].split(':')[:1], int(sys.argv[1].split(':')[1])) if len(sys.argv) > 1 else B.Draft('chain', 8)
N = int(sys.argv[2]) if len(sys.argv) > 2 else 40
c8, t16 = B.Draft('chain', 8), B.Draft('tree', 16)
budget = B.AutoBudget(16, B.CostTable({(1, d): 1.0 for d in B.auto_drafts(16, (16, 32))}, refine=False), trees=(16, 32))
rows = []
for i, tr in enumerate(traces[1:N + 1]):
    w = Walk(i, tr, 16)
    while not w.done:
        left = tr["tokens"] - w.produced
        budget.prepare()
        est = budget._expected_tokens([i], [left]); eg = dict(budget._expected_tokens(['unseen'], [left]))
        acts = {}
        for d in (c8, t16):
            x = copy.copy(w); x.taus = []
            acts[d] = x.step(d)[0]
        tau, equiv = w.step(run)
        rows.append((i, left, est[c8], est[t16], acts[c8], acts[t16], eg[c8], eg[t16]))
        budget.observe_window([i], run, [[tau]], [[equiv]] if equiv else (), [w.done])
    budget.prepare(now=True)
    budget.forget(i)
full = [r for r in rows if r[1] >= 16]
def summary(sel, name):
    m = lambda j: st.mean(r[j] for r in sel)
    print(f"{name:>10} ({len(sel)}): c8 est {m(2):.2f} act {m(4):.2f} ({m(2)/m(4):.3f})  t16 est {m(3):.2f} act {m(5):.2f} ({m(3)/m(5):.3f})  ratio t16/c8 est {m(3)/m(2):.3f} act {m(5)/m(4):.3f} | global c8 {m(6)/m(4):.3f} t16 {m(7)/m(5):.3f}")
summary(full, 'all')
for lo in range(0, N, N // 4):
    summary([r for r in full if lo <= r[0] < lo + N // 4], f"{lo}-{lo + N // 4 - 1}")
print('cal', round(budget.calibration.factor(c8), 3), round(budget.calibration.factor(t16), 3))
import numpy as np
np.set_printoptions(precision=3, suppress=True, linewidth=200)
g, misses = budget._estimates()
print('g', g[:8]); print('miss16', misses[16][:8])
# truth over the tree:16 run's anchors: tree and chain survival per depth (uncensored chain from the trace)
ta, tt, ca, ct = np.zeros(15), np.zeros(15), np.zeros(15), np.zeros(15)
pa, pt = np.zeros(15), np.zeros(15)
for i, tr in enumerate(traces[1:N + 1]):
    w = Walk(i, tr, 16)
    while not w.done:
        t = w.produced - 1
        L = tr['chain'][t] if t < len(tr['chain']) else 0
        T = tr['trees']['16']['accepted'][t]; D = tr['trees']['16']['chain_depth'][t]
        for j in range(15):
            if T >= j: tt[j] += 1; ta[j] += T > j
            if L >= j: ct[j] += 1; ca[j] += L > j
        w.step(run)
print('tree p', (ta/np.maximum(tt,1))[:8]); print('chain p', (ca/np.maximum(ct,1))[:8])
print('true miss', ((1-ta/np.maximum(tt,1))/(1-ca/np.maximum(ct,1)))[:8])
print('tree curve E(16)', 1+np.cumprod(ta/np.maximum(tt,1))[:15].sum(), 'chain E(8)', 1+np.cumprod(ca/np.maximum(ct,1))[:7].sum())
tc = budget.tree_curves[16]
print('paired tree p', (tc.tree.accepted/np.maximum(tc.tree.trials,1))[:8], tc.tree.trials[:8])
print('paired chain p', (tc.chain.accepted/np.maximum(tc.chain.trials,1))[:8], tc.chain.trials[:8])
print('curve p', (budget.curve.accepted/np.maximum(budget.curve.trials,1))[:8], budget.curve.trials[:8])
