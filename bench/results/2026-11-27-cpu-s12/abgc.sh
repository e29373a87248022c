#!/bin/bash
# abgc.sh OUT N: N alternating pairs of the server bench at c = 4, 8, 16 (ar, auto): A = no heap freeze, B = freeze
out=$1; n=$2; mkdir -p $out
for i in $(seq 1 $n); do
  for v in A B; do
    d=/tmp/s12/$v
    (cd $d && GCLOG=$out/gc_$v.txt PYTHONPATH=/tmp/s12/gchook:$d python scripts/bench_openai_server.py --modes ar,auto --concurrency 4,8,16 --num-prompts 16 \
      --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $out/$v$i > $out/$v$i.log 2>&1)
    echo "$v$i $(grep -E '^\| (4|8|16) \| (auto|ar)' $out/$v$i.log | awk -F'|' '{print $2 $3 $4}' | paste -sd' ')"
  done
done
