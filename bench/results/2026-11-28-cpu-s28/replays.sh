#!/bin/bash
# Replays (s24's sim-fresh traces and costs, time noise 0.05) of the working tree ("new") against a0486df ("base",
# /tmp/s28base): static batches 1 / 8 / 16 and continuous (a server) at 1 / 8 / 16, seeds 1..$1. Prints auto's ratio
# to AR per seed; and auto / the best fixed.
d=bench/results/2026-11-28-cpu-s24/sim-fresh
for s in $(seq 1 ${1:-6}); do
  for v in base new; do
    case $v in base) P=/tmp/s28base:. ;; *) P=. ;; esac
    for mode in "" "--continuous"; do
      out=$(PYTHONPATH=$P python scripts/sim_draft_budget.py --traces $d/traces.json --costs $d/costs.json --batch-sizes 1,8,16 $mode --time-noise 0.05 --seed $s --output /tmp/s28/replay-$v 2>&1)
      echo "$out" | grep -E "^(batch|concurrency)" | python bench/results/2026-11-28-cpu-s28/replay_ratios.py $s $v
    done
  done
done
