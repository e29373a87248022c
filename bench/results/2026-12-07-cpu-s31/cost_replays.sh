#!/bin/bash
# Cost-learning replays at batch 1: s24's sim-fresh traces and window costs, every window's time x exp(N(0, NOISE)),
# the machine's speed a random walk (steps N(0, DRIFT) on the replay's clock), auto's startup table x exp(N(0, START))
# per draft (seeded): the startup timing's errors the online refinement has to undo. Per seed and code copy
# ($CODE_ROOT/<name>, default /tmp/s31), auto / AR and auto / the best fixed draft (the cost-replays-*.txt recorded
# here have the second only). `NOISE=0.15 DRIFT=0.01 START=0.07 bash cost_replays.sh FIRST LAST NAME...`; summarize
# with `python bench/results/2026-11-28-cpu-s28/summarize_replays.py FILE...`.
d=bench/results/2026-11-28-cpu-s24/sim-fresh
for s in $(seq $1 $2); do
  for v in "${@:3}"; do
    PYTHONPATH=${CODE_ROOT:-/tmp/s31}/$v:. python scripts/sim_draft_budget.py --traces $d/traces.json --costs $d/costs.json \
      --batch-sizes ${SIZES:-1} --time-noise ${NOISE:-0.15} --machine-drift ${DRIFT:-0.01} --startup-noise ${START:-0.07} \
      --seed $s 2>&1 | python bench/results/2026-11-28-cpu-s28/replay_ratios.py $s $v
  done
done
