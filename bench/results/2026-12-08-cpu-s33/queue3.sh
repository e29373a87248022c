#!/bin/bash
# Standard bench, rounds of three code copies in rotated order (head = HEAD 3a85a5a's budget; fin = ANCHOR_RATE 0.2;
# fin2 = the anchor's reference fresh in time as well: anchor_rate.patch, anchor_time.patch). Code copies in
# $CODE_ROOT/<name>; results in $R. `bash queue3.sh FIRST LAST`; nothing else may run meanwhile.
cd /work/main
R=${R:-bench/results/2026-12-08-cpu-s33}
orders=("head fin fin2" "fin fin2 head" "fin2 head fin" "head fin2 fin" "fin head fin2" "fin2 fin head")
for i in $(seq $1 $2); do
  for v in ${orders[$(( (i - 1) % 6 ))]}; do
    PYTHONPATH=${CODE_ROOT:-/tmp/s33}/$v:. python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 \
      --output $R/bench-$v-$i > $R/bench-$v-$i.log 2>&1
    echo "$i $v $(date +%T) $(grep -o 'auto / best fixed ([^)]*): [0-9.]*' $R/bench-$v-$i.log | tr '\n' ' ')"
  done
done
