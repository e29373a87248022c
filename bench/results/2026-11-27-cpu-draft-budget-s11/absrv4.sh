#!/bin/bash
# absrv4.sh OUT N A_DIR B_DIR: N alternating pairs of the server bench at c = 4, 8, 16 (ar, auto); LEVELS=1,2 for others
out=$1; n=$2; A=$3; B=$4; mkdir -p $out; levels=${LEVELS:-4,8,16}
for i in $(seq 1 $n); do
  for v in A B; do
    if [ $v = A ]; then d=$A; else d=$B; fi
    (cd $d && PYTHONPATH=$d python scripts/bench_openai_server.py --modes ar,auto --concurrency $levels --num-prompts 16 \
      --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $out/$v$i > $out/$v$i.log 2>&1)
    echo "$v$i $(grep -E "^\\| (${levels//,/|}) \\| auto" $out/$v$i.log | awk -F'|' '{print $2 $3 $5 $8}' | paste -sd' ')"
  done
done
