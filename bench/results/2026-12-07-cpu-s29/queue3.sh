#!/bin/bash
# The final budget (/tmp/s29/fin: the anchor reference over the drift) against 4308adf (/tmp/s29/base), ABBA by pair:
# the lock-in repro and the standard bench (pairs 7-9), the server Pareto (2 pairs), c = 16 in-process (2 pairs).
R=bench/results/2026-12-07-cpu-s29
for i in 7 8 9; do
  if [ $((i % 2)) = 1 ]; then order="base fin"; else order="fin base"; fi
  for v in $order; do
    echo "=== lock-$v-$i $(date -u +%H:%M:%S)"
    SCALE=1.16 PYTHONPATH=/tmp/s29/$v:. python $R/costlock_engine.py --batch-sizes 1 --modes chain:8,tree:16,auto --num-prompts 40 --warmup 1 --output $R/lock-$v-$i > $R/lock-$v-$i.log 2>&1
    grep "auto / best fixed" $R/lock-$v-$i.log | cut -c1-70
  done
done
for i in 7 8 9; do
  if [ $((i % 2)) = 1 ]; then order="base fin"; else order="fin base"; fi
  for v in $order; do
    echo "=== bench-$v-$i $(date -u +%H:%M:%S)"
    PYTHONPATH=/tmp/s29/$v:. python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$v-$i > $R/bench-$v-$i.log 2>&1
    grep "auto / best fixed" $R/bench-$v-$i.log | cut -c1-70
  done
done
for i in a b; do
  if [ $i = a ]; then order="base fin"; else order="fin base"; fi
  for v in $order; do
    echo "=== pareto-$v-$i $(date -u +%H:%M:%S)"
    PYTHONPATH=/tmp/s29/$v:. python scripts/bench_openai_server.py --modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $R/pareto-$v-$i > $R/pareto-$v-$i.log 2>&1
    tail -3 $R/pareto-$v-$i.log | cut -c1-150
  done
done
for i in 1 2; do
  if [ $i = 1 ]; then order="base fin"; else order="fin base"; fi
  for v in $order; do
    echo "=== c16-$v-$i $(date -u +%H:%M:%S)"
    PYTHONPATH=/tmp/s29/$v:. python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 2>&1 | grep "c16 a\|SUMMARY\|    probe"
  done
done
echo DONE
