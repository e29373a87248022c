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
    echo "$out" | grep -E "^(batch|concurrency)" | python -c "
import sys, re
for line in sys.stdin:
    kind, n = line.split()[0], line.split()[1].rstrip(':')
    vals = dict(re.findall(r'(\S+) ([0-9.]+)x', line))
    fixed = {k: float(v) for k, v in vals.items() if k not in ('auto', 'oracle', 'ar')}
    best = max(fixed, key=fixed.get)
    print(f'seed $s $v {kind:11s} {n:>2s} auto/AR {float(vals[\"auto\"]):.3f} auto/best fixed ({best}) {float(vals[\"auto\"]) / fixed[best]:.3f}')
"
  done
done
