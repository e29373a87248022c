#!/bin/bash
# Three more pairs of the lock-in repro and the standard bench for the final code (/tmp/s29/fin = 2a09a0b; c26fe77 is
# the same behaviour) against 4308adf, ABBA (pairs 10-12); transformers 5.24.0 here (the earlier runs had 5.25.0,
# each pair compares within one version).
R=bench/results/2026-12-07-cpu-s29
for i in 10 11 12; do
  if [ $((i % 2)) = 1 ]; then order="base fin"; else order="fin base"; fi
  for v in $order; do
    echo "=== lock-$v-$i $(date -u +%H:%M:%S)"
    SCALE=1.16 PYTHONPATH=/tmp/s29/$v:. python $R/costlock_engine.py --batch-sizes 1 --modes chain:8,tree:16,auto --num-prompts 40 --warmup 1 --output $R/lock-$v-$i > $R/lock-$v-$i.log 2>&1
    grep "auto / best fixed" $R/lock-$v-$i.log | cut -c1-70
  done
done
for i in 10 11 12; do
  if [ $((i % 2)) = 1 ]; then order="base fin"; else order="fin base"; fi
  for v in $order; do
    echo "=== bench-$v-$i $(date -u +%H:%M:%S)"
    PYTHONPATH=/tmp/s29/$v:. python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$v-$i > $R/bench-$v-$i.log 2>&1
    grep "auto / best fixed" $R/bench-$v-$i.log | cut -c1-70
  done
done
echo DONE
