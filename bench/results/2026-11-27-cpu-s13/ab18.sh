#!/bin/bash
# ab18.sh OUT N A_DIR B_DIR: N alternating pairs at batch 1 and 8 (chain:8, tree:16, auto; 40 prompts, one warm-up batch)
out=$1; n=$2; A=$3; B=$4; mkdir -p $out
for i in $(seq 1 $n); do
  for v in A B; do
    if [ $v = A ]; then d=$A; else d=$B; fi
    (cd $d && PYTHONPATH=$d python scripts/bench_draft_budget.py --batch-sizes 1,8 --modes chain:8,tree:16,auto \
      --num-prompts 40 --warmup 1 > $out/$v$i.log 2>&1)
    echo "$v$i $(grep -E 'auto / best fixed' $out/$v$i.log | grep -o 'fixed ([a-z0-9:]*): [0-9.]*' | paste -sd' ') | $(grep -E '^batch (1|8) \(' $out/$v$i.log | grep -o 'auto [0-9.]* tok/s ([0-9.]*x' | paste -sd' ')"
  done
done
