#!/bin/bash
# After CI: the cold start at c = 8 (s25's cold_c8.py: a fresh engine per run, 40 prompts, continuous arrivals, 1 ms
# host work a step) at 128 tokens, HEAD (/tmp/s28new, = f9fb6f0's engine and budget code) against a0486df
# (/tmp/s28base), 4 pairs, order alternating by run; then 4 more standard-bench runs of HEAD alone (runs 17-20).
R=bench/results/2026-11-28-cpu-s28
for i in 1 2 3 4; do
  if [ $((i % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do
    if [ $v = old ]; then P=/tmp/s28base:.; else P=/tmp/s28new:.; fi
    echo "== $v TOKENS=128"; TOKENS=128 PYTHONPATH=$P python bench/results/2026-11-28-cpu-s25/cold_c8.py $i 8 2>&1 | grep -A2 "^run"
  done
done
for run in new-17 new-18 new-19 new-20; do
  echo "=== $run $(date -u +%H:%M:%S)"
  PYTHONPATH=/tmp/s28new:. python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$run > $R/bench-$run.log 2>&1
  grep "auto / best fixed" $R/bench-$run.log | cut -c1-60
done
echo DONE
