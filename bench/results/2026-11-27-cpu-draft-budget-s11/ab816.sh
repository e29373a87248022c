#!/bin/bash
# ab816.sh OUT N A_DIR B_DIR (two frozen trees, each a copy of a commit's files): N alternating pairs at batch 8 and 16 (chain:8, auto; 48 prompts, one warm-up batch)
out=$1; n=$2; A=$3; B=$4; mkdir -p $out
for i in $(seq 1 $n); do
  for v in A B; do
    if [ $v = A ]; then d=$A; else d=$B; fi
    (cd $d && PYTHONPATH=$d python scripts/bench_draft_budget.py --batch-sizes 8,16 --modes chain:8,auto \
      --num-prompts 48 --warmup 1 > $out/$v$i.log 2>&1)
    echo "$v$i $(grep -E '^batch (8|16) \(' $out/$v$i.log | grep -o 'auto [0-9.]* tok/s ([0-9.]*x' | paste -sd' ')"
  done
done
