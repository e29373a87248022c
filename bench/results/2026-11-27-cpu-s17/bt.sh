#!/bin/bash
# alternate in-process budget time: bt.sh N TREE... (TREE "." = /work/main)
n=$1; shift
for i in $(seq 1 $n); do for t in "$@"; do
  d=$t; [ "$t" = "." ] && d=/work/main
  r=$(cd $d && PYTHONPATH=$d python /work/main/bench/results/2026-11-27-cpu-s12/budget_time.py 1 40 inner 2>&1)
  echo "$t $(echo "$r" | head -1 | sed -E 's/.*budget ([0-9.]+) us per window.*/\1/') | $(echo "$r" | grep -E "_take_in|_count_steps|_priced |observe  " | awk '{print $2, $6}' | tr '\n' ' ')"
done; done
