#!/bin/bash
# Replays (s24's sim-fresh traces and costs, time noise 0.05): static batches 1 / 8 / 16 and continuous (a server) at
# 1 / 8 / 16, seeds 1..$1, for each code copy named after it (/tmp/s29/<name>, e.g. base new burst1). Prints auto's
# ratio to AR per seed, and auto / the best fixed. `bash replays.sh SEEDS NAME...`; summarize with
# `python bench/results/2026-11-28-cpu-s28/summarize_replays.py bench/results/2026-12-07-cpu-s29`.
# Kept: replays-committed.txt ("new": 2becdcc) and replays-base-bursts-noburst.txt ("base": 4308adf; "bursts": 2becdcc
# with a measurement's burst at every batch size, as many windows as the measurement needs there, up to TREE_BURST;
# "noburst": 2becdcc with TREE_BURST 1, the entry learning alone).
d=bench/results/2026-11-28-cpu-s24/sim-fresh
seeds=$1; shift
for s in $(seq 1 $seeds); do
  for v in "$@"; do
    for mode in "" "--continuous"; do
      out=$(PYTHONPATH=/tmp/s29/$v:. python scripts/sim_draft_budget.py --traces $d/traces.json --costs $d/costs.json --batch-sizes 1,8,16 $mode --time-noise 0.05 --seed $s --output /tmp/s29/replay-$v 2>&1)
      echo "$out" | grep -E "^(batch|concurrency)" | python bench/results/2026-11-28-cpu-s28/replay_ratios.py $s $v
    done
  done
done
