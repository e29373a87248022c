#!/bin/bash
# usage: ab.sh OUT N A_DIR B_DIR : alternate A and B, b1,8
out=$1; n=$2; A=$3; B=$4; mkdir -p $out
for i in $(seq 1 $n); do
  for v in A B; do
    if [ $v = A ]; then d=$A; else d=$B; fi
    (cd $d && PYTHONPATH=$d python scripts/bench_draft_budget.py --batch-sizes 1,8 --modes chain:8,tree:16,auto --num-prompts 40 --warmup 1 --output $out/$v$i > $out/$v$i.log 2>&1)
    echo "$v$i $(grep 'auto / best' $out/$v$i.log | awk '{print $6}' | paste -sd' ') b8vsAR $(grep '^batch 8 (' $out/$v$i.log | grep -o 'auto [0-9.]* tok/s ([0-9.]*x')"
  done
done
