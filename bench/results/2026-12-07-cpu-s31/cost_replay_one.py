"""One cost-learning replay at batch 1 (as cost_replays.sh), printing auto's choices and its cost table's ratios to
tree:16 at the start and end against the windows' true costs. `PYTHONPATH=CODE:. python cost_replay_one.py SEED
[NOISE DRIFT START]`"""
import collections, sys
sys.path.insert(0, "scripts")
import sim_draft_budget as sim
from dflash_trt.spec import budget as bm
seed = int(sys.argv[1])
noise, drift, start = (float(x) for x in (sys.argv[2:5] if len(sys.argv) > 4 else (0.15, 0.01, 0.07)))
count, tables = collections.Counter(), []
_c = bm.AutoBudget.choose
def ch(self, req, left=None, length=None):
    d = _c(self, req, left, length)
    count[str(d)] += 1
    if not tables:
        tables.append(self.cost)
    return d
bm.AutoBudget.choose = ch
_s = sim.simulate
def simulate(traces, size, policy, cost, *a, **kw):
    out = _s(traces, size, policy, cost, *a, **kw)
    if isinstance(policy, bm.AutoBudget):
        t = tables[0]
        ref = bm.Draft("tree", 16)
        names = ["chain:4", "chain:8", "chain:16", "tree:16", "tree:32"]
        ds = [sim.parse_draft(x) for x in names]
        print("choices", dict(count))
        print("true   ", {x: round(cost(1, d) / cost(1, ref), 3) for x, d in zip(names, ds)})
        print("learnt ", {x: round(t.cost(1, d) / t.cost(1, ref), 3) for x, d in zip(names, ds)},
              "seen", {str(k[1]): v for k, v in t._seen.items()})
    return out
sim.simulate = simulate
d = "bench/results/2026-11-28-cpu-s24/sim-fresh"
sim.main(["--traces", f"{d}/traces.json", "--costs", f"{d}/costs.json", "--batch-sizes", "1", "--time-noise", str(noise),
          "--machine-drift", str(drift), "--startup-noise", str(start), "--seed", str(seed)])
