#!/bin/bash
# replays.sh's runs of the working tree only, labelled $2, TREE_OPTIMISM set to $3 in spec/budget.py for the run
d=bench/results/2026-11-28-cpu-s24/sim-fresh
for s in $(seq 1 ${1:-6}); do
  v=$2
  for mode in "" "--continuous"; do
    out=$(PYTHONPATH=. python -c "
import sys, runpy
import dflash_trt.spec.budget as b
b.TREE_OPTIMISM = float('$3')
sys.argv = ['sim'] + sys.argv[1:]
runpy.run_path('scripts/sim_draft_budget.py', run_name='__main__')
" --traces $d/traces.json --costs $d/costs.json --batch-sizes 1,8,16 $mode --time-noise 0.05 --seed $s --output /tmp/s28/replay-$v 2>&1)
    echo "$out" | grep -E "^(batch|concurrency)" | python bench/results/2026-11-28-cpu-s28/replay_ratios.py $s $v
  done
done
