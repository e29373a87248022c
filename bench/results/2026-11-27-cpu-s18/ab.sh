#!/bin/bash
# alternating batch-1 pairs: A = cac176b, B = trees calibrated together
for i in 1 2 3 4 5 6; do
  for v in A B; do
    D=/tmp/ab$v
    PYTHONPATH=$D python $D/scripts/bench_draft_budget.py --batch-sizes 1 --num-prompts 40 --warmup 1 --output /tmp/s18/ab_${v}_$i > /tmp/s18/ab_${v}_$i.txt 2>&1
    echo "$v$i $(grep -oE 'auto / best fixed \([a-z0-9:]+\): [0-9.]+' /tmp/s18/ab_${v}_$i.txt | head -1) $(grep -oE "auto chose \{[^}]*\}" /tmp/s18/ab_${v}_$i.txt | head -1)" >> /tmp/s18/ab.txt
  done
done
