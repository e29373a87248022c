#!/bin/bash
# ab.sh OUT N A_DIR B_DIR [BATCH_SIZES]: N alternating pairs of scripts/bench_draft_budget.py (chain:8, tree:16, auto;
# 40 prompts, one warm-up batch) run from two frozen trees (each a copy of a commit's files); prints auto / best fixed.
out=$1; n=$2; A=$3; B=$4; sizes=${5:-1}; mkdir -p $out
for i in $(seq 1 $n); do
  for v in A B; do
    if [ $v = A ]; then d=$A; else d=$B; fi
    (cd $d && PYTHONPATH=$d python scripts/bench_draft_budget.py --batch-sizes $sizes --modes chain:8,tree:16,auto \
      --num-prompts 40 --warmup 1 > $out/$v$i.log 2>&1)
    echo "$v$i $(grep -o 'auto / best fixed ([^)]*): [0-9.]*' $out/$v$i.log | paste -sd' ') $(grep '^batch 8 (' $out/$v$i.log | grep -o 'auto [0-9.]* tok/s ([0-9.]*x')"
  done
done
