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
done
