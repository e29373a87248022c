#!/bin/bash
# Tree optimism (TREE_OPTIMISM 0.5, the working tree copied to /tmp/s28new) against a0486df (/tmp/s28base): the
# standard bench, 4 ABBA pairs (new / base / base / new, twice).
# Run from the repository root: bash bench/results/2026-11-28-cpu-s28/queue2.sh > bench/results/2026-11-28-cpu-s28/queue2.txt 2>&1
R=bench/results/2026-11-28-cpu-s28
for run in new-1 base-2 base-3 new-4 new-5 base-6 base-7 new-8; do
  case $run in base*) P=/tmp/s28base:. ;; *) P=/tmp/s28new:. ;; esac
  echo "=== $run $(date -u +%H:%M:%S)"
  PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$run > $R/bench-$run.log 2>&1
  grep "auto / best fixed" $R/bench-$run.log | cut -c1-60
done
echo DONE
