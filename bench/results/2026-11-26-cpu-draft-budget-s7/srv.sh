#!/bin/bash
out=$1; n=$2; shift 2; mkdir -p $out
for i in $(seq 1 $n); do
  for d in "$@"; do
    v=$(basename $d)
    (cd $d && PYTHONPATH=$d python scripts/bench_openai_server.py --modes ar,auto --concurrency 4,8 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 6 --warmup-rounds 1 --output $out/$v$i > $out/$v$i.log 2>&1)
    echo "$v$i $(grep -E '^\| (4|8) \| auto' $out/$v$i/README.md | awk -F'|' '{print $2 $5 $8}' | paste -sd' ')"
  done
done
