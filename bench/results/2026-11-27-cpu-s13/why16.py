"""simgrid's cell (TABLE STEPS BATCH [SEEDS]): every drafting window auto chose at 9+ requests, with its pricing (expected tokens per request, entry, AR's entry) against the replay's true cost ratio."""
import json, sys, collections
sys.path.insert(0, "scripts"); sys.path.insert(0, "bench/results/2026-11-26-cpu-draft-budget-s10")
from sim_draft_budget import cost_tables, simulate
from simgrid import SIM, TREES, priced
from dflash_trt.spec.budget import AutoBudget, CostTable, Draft
name, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
traces = json.loads((SIM / "traces.json").read_text())
costs = priced(json.loads((SIM / "costs.json").read_text()), TREES[name])
_, table, plain, startup = cost_tables(costs["windows"], costs["startup"])
for seed in range(int(sys.argv[4]) if len(sys.argv) > 4 else 3):
    b = AutoBudget(16, CostTable(dict(startup)), trees=(16, 32))
    oc = b.choose
    def choose(requests, left=None, length=None):
        d = oc(requests, left, length)
        n = len(requests)
        if n >= 9 and d.size > 1:
            e, c, now, rates, best, probe = b._pricing[2]
            A = Draft("chain", 1)
            print(f"seed {seed} n {n} {d} probing={b._probing} E[{d}]/n {e[d]/n:.2f} cost {1000*c[d]:.1f} now {1000*now[d]:.1f} | AR cost {1000*c[A]:.2f} | true cost ratio {table.cost(n,d)/table.cost(n,A):.2f} priced ratio {now[d]/now[A]:.2f} drift {b.cost.drift:.2f} trials0 {b.curve.trials[0]:.0f}")
        return d
    b.choose = choose
    simulate(traces, batch, b, table.cost, 16, noise=0.1, seed=seed, steps=steps)
