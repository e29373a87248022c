#!/bin/bash
# More pairs of queue1.sh's two comparisons (pairs 3-6), then the server Pareto (2 pairs) and the c = 16 in-process
# run (s24's c16_one.py, 2 pairs): 2becdcc's budget (/tmp/s29/new) against 4308adf (/tmp/s29/base), ABBA by pair.
# (Stopped during its first Pareto run: the budget changed (the anchor reference, 2026-12-07 15:15); queue3.sh measured
# the final version.)
R=bench/results/2026-12-07-cpu-s29
for i in 3 4 5 6; do
  if [ $((i % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    echo "=== lock-$v-$i $(date -u +%H:%M:%S)"
    SCALE=1.16 PYTHONPATH=/tmp/s29/$v:. python $R/costlock_engine.py --batch-sizes 1 --modes chain:8,tree:16,auto --num-prompts 40 --warmup 1 --output $R/lock-$v-$i > $R/lock-$v-$i.log 2>&1
    grep "auto / best fixed" $R/lock-$v-$i.log | cut -c1-70
  done
done
for i in 3 4 5 6; do
  if [ $((i % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    echo "=== bench-$v-$i $(date -u +%H:%M:%S)"
    PYTHONPATH=/tmp/s29/$v:. python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$v-$i > $R/bench-$v-$i.log 2>&1
    grep "auto / best fixed" $R/bench-$v-$i.log | cut -c1-70
  done
done
for i in a b; do
  if [ $i = a ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    echo "=== pareto-$v-$i $(date -u +%H:%M:%S)"
    PYTHONPATH=/tmp/s29/$v:. python scripts/bench_openai_server.py --modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $R/pareto-$v-$i > $R/pareto-$v-$i.log 2>&1
    tail -3 $R/pareto-$v-$i.log | cut -c1-150
  done
done
for i in 1 2; do
  if [ $i = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    echo "=== c16-$v-$i $(date -u +%H:%M:%S)"
    PYTHONPATH=/tmp/s29/$v:. python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 2>&1 | grep "c16 a\|SUMMARY\|    probe"
  done
done
echo DONE
