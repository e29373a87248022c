#!/bin/bash
# Standard bench, ABBA pairs: "head" = 9705cad (the budget before this session), "fin" = this session's budget (code
# copies in $CODE_ROOT/<name>, default /tmp/s31; results in $R, default this directory). `bash queue.sh FIRST LAST`;
# nothing else may run meanwhile.
cd /work/main
R=${R:-bench/results/2026-12-07-cpu-s31}
for i in $(seq $1 $2); do
  if [ $((i % 2)) -eq 1 ]; then order="head fin"; else order="fin head"; fi
  for v in $order; do
    PYTHONPATH=${CODE_ROOT:-/tmp/s31}/$v:. python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 \
      --output $R/bench-$v-$i > $R/bench-$v-$i.log 2>&1
    echo "$i $v $(date +%T) $(grep -o 'auto / best fixed ([^)]*): [0-9.]*' $R/bench-$v-$i.log | tr '\n' ' ')"
  done
done
