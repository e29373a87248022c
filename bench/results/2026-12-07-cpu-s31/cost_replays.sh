#!/bin/bash
# Cost-learning replays at batch 1: s24's sim-fresh traces and window costs, every window's time x exp(N(0, NOISE)),
# the machine's speed a random walk (DRIFT per window), auto's startup table x exp(N(0, START)) per draft (seeded):
# the startup timing's errors the online refinement has to undo. Per seed and code copy ($CODE_ROOT/<name>, default /tmp/s31), auto / the
# best fixed draft. `NOISE=0.15 DRIFT=0.01 START=0.07 bash cost_replays.sh FIRST LAST NAME...`
d=bench/results/2026-11-28-cpu-s24/sim-fresh
for s in $(seq $1 $2); do
  for v in "${@:3}"; do
    PYTHONPATH=${CODE_ROOT:-/tmp/s31}/$v:. python scripts/sim_draft_budget.py --traces $d/traces.json --costs $d/costs.json \
      --batch-sizes ${SIZES:-1} --time-noise ${NOISE:-0.15} --machine-drift ${DRIFT:-0.01} --startup-noise ${START:-0.07} \
      --seed $s 2>&1 | grep -E "^batch" | python -c "
import sys, re
for line in sys.stdin:
    n = line.split()[1].rstrip(':')
    vals = dict(re.findall(r'(\S+) ([0-9.]+)x', line))
    fixed = {k: float(v) for k, v in vals.items() if k not in ('auto', 'oracle', 'ar')}
    best = max(fixed, key=fixed.get)
    print(f'seed $s $v batch {n:>2s} auto/best fixed ({best}) {float(vals[\"auto\"]) / fixed[best]:.3f}')
"
  done
done
