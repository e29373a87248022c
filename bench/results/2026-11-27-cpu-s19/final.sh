#!/bin/bash
for i in 4 5 6; do
  (cd /tmp/s19/NEW && PYTHONPATH=/tmp/s19/NEW python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output /tmp/s19/ab2_NEW_$i > /tmp/s19/ab2_NEW_$i.txt 2>&1)
  echo "NEW $i $(grep -oE 'auto / best fixed \([a-z0-9:]+\): [0-9.]+' /tmp/s19/ab2_NEW_$i.txt | tr '\n' ' ')"
done
