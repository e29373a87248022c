#!/bin/bash
# alternating in-process replays: A then B (B first on odd pairs)
out=$1; n=$2; shift 2
for i in $(seq 1 $n); do
  if [ $((i % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
  for t in $order; do
    r=$(cd /tmp/s15/$t && PYTHONPATH=/tmp/s15/$t python bench/results/2026-11-26-cpu-draft-budget-s7/replay.py "$@" 2>&1 | grep '^c')
    echo "pair $i $t $r" | tee -a $out
  done
done
