#!/bin/bash
# hold() ends before a fade (new) against 8aeb241 (old, /tmp/s28old): the standard bench, new / old / old / new.
# Run from the repository root: bash bench/results/2026-11-28-cpu-s28/queue1.sh > bench/results/2026-11-28-cpu-s28/queue1.txt 2>&1
D=bench/results/2026-11-28-cpu-s28
for run in new1 old1 old2 new2; do
  case $run in old*) P=/tmp/s28old:. ;; *) P=. ;; esac
  echo "=== $run $(date -u +%H:%M:%S)"
  PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output /tmp/s28/bench-$run 2>&1 | tail -30
done
