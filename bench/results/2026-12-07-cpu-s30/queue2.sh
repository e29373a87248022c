#!/bin/bash
# After CI: 4 more standard bench pairs, ABBA (base / fin as in queue1.sh): does base's tree:32 lock-in at batch 1 recur,
# and does fin's batch 1 hold?
cd /work/main
R=bench/results/2026-12-07-cpu-s30
for i in 4 5 6 7; do
  if [ $((i % 2)) = 1 ]; then order="base fin"; else order="fin base"; fi
  for v in $order; do
    echo "== bench $v $i $(date +%T)"
    PYTHONPATH=/tmp/s30/$v:. python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$v-$i > $R/bench-$v-$i.log 2>&1
  done
done
echo "DONE $(date +%T)"
