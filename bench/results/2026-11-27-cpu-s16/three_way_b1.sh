#!/bin/bash
for i in $(seq 1 $1); do
  for t in ${TREES:-A V1 V4}; do
    r=$(cd /tmp/s16/$t && PYTHONPATH=/tmp/s16/$t timeout 300 python scripts/bench_draft_budget.py --batch-sizes 1 --num-prompts 40 --warmup 1 --modes chain:8,chain:16,tree:16,auto 2>&1 | grep -E "auto / best" | sed -E "s/.*\(([a-z0-9:]+)\): ([0-9.]+); auto chose (.*)/\1 \2 \3/")
    echo "round $i $t $r" | tee -a $2
  done
done
