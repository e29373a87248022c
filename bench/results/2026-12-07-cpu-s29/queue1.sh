#!/bin/bash
# The working tree's budget (/tmp/s29/new = the commit after 4308adf: entry learning against the anchor, measurement bursts at one request) against HEAD
# 4308adf (/tmp/s29/base), ABBA by pair: (A) the engine cost lock-in repro (costlock_engine.py, tree entries x1.16 at
# startup), batch 1; (B) the standard bench, batch 1 and 8.
R=bench/results/2026-12-07-cpu-s29
for i in 1 2; do
  if [ $((i % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    echo "=== lock-$v-$i $(date -u +%H:%M:%S)"
    SCALE=1.16 PYTHONPATH=/tmp/s29/$v:. python $R/costlock_engine.py --batch-sizes 1 --modes chain:8,tree:16,auto --num-prompts 40 --warmup 1 --output $R/lock-$v-$i > $R/lock-$v-$i.log 2>&1
    grep "auto / best fixed" $R/lock-$v-$i.log | cut -c1-70
  done
done
for i in 1 2; do
  if [ $((i % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    echo "=== bench-$v-$i $(date -u +%H:%M:%S)"
    PYTHONPATH=/tmp/s29/$v:. python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$v-$i > $R/bench-$v-$i.log 2>&1
    grep "auto / best fixed" $R/bench-$v-$i.log | cut -c1-70
  done
done
echo DONE
