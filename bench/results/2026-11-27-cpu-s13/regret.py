"""simgrid's cell: auto's loss against AR split by the batch size and draft of its windows.

    python bench/results/2026-11-27-cpu-s13/regret.py TABLE STEPS BATCH [SEEDS]

Per auto window (n requests, draft d, `took` seconds, `emitted` tokens): regret = took - emitted x AR's seconds per
token at n (cost(n, chain:1) / n): what the window lost (+) or won (-) against running AR for the tokens it emitted.
Sums by (n bucket, draft) over the seeds; 'total loss' = sum of regrets / AR's total time."""
import collections
import json
import sys

sys.path.insert(0, "scripts")
sys.path.insert(0, "bench/results/2026-11-26-cpu-draft-budget-s10")
from sim_draft_budget import cost_tables, simulate  # noqa: E402
from simgrid import SIM, TREES, priced  # noqa: E402

from dflash_trt.spec.budget import AutoBudget, CostTable, Draft  # noqa: E402

name, steps, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seeds = int(sys.argv[4]) if len(sys.argv) > 4 else 10
traces = json.loads((SIM / "traces.json").read_text())
costs = priced(json.loads((SIM / "costs.json").read_text()), TREES[name])
_, table, plain, startup = cost_tables(costs["windows"], costs["startup"])
ar_tok, ar_sec, _ = simulate(traces, batch, Draft("chain", 1), plain.cost, 16, steps=steps)
print(f"AR {ar_tok / ar_sec:.1f} tok/s")
AR = Draft("chain", 1)
reg = collections.defaultdict(float)
cnt = collections.Counter()
ratios = []
for seed in range(seeds):
    budget = AutoBudget(16, CostTable(dict(startup)), trees=(16, 32))
    log = []
    oc, ot = budget.choose, budget.observe_window

    def choose(requests, left=None, length=None):
        d = oc(requests, left, length)
        log.append([len(requests), d, sum(left), None])
        return d

    budget.choose = choose
    ow = budget.observe_time

    def observe_time(n, d, s, length=None):
        log[-1][3] = s
        return ow(n, d, s, length)

    budget.observe_time = observe_time
    tok, sec, _ = simulate(traces, batch, budget, table.cost, 16, noise=0.1, seed=seed, steps=steps)
    ratios.append(tok / sec / (ar_tok / ar_sec))
    # emitted per window = left before - left at the next window of the same batch (approx: min(left, ...))
    for i, (n, d, left, s) in enumerate(log):
        nxt = log[i + 1][2] if i + 1 < len(log) and log[i + 1][2] < left else 0
        emitted = left - nxt + (n if False else 0)
        took = s * steps
        r = took - emitted * plain.cost(n, AR) / n
        bucket = "n=16" if n == batch else ("n>=9" if n >= 9 else ("n 4-8" if n >= 4 else "n<=3"))
        reg[(bucket, str(d))] += r
        cnt[(bucket, str(d))] += 1
print(f"auto / AR mean {sum(ratios) / len(ratios):.4f} (min {min(ratios):.3f})")
for key in sorted(reg, key=lambda k: -reg[k]):
    print(f"{key[0]:6s} {key[1]:9s} windows {cnt[key] / seeds:6.1f}  regret {1000 * reg[key] / seeds:8.2f} ms "
          f"({100 * reg[key] / seeds / ar_sec:+.2f} % of AR's time)")
