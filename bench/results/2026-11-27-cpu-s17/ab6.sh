#!/bin/bash
# ab6.sh N OUT TREE...: alternating batch-1 runs with the README's six modes
for i in $(seq 1 $1); do
  for t in "${@:3}"; do
    r=$(cd /tmp/s17/$t && PYTHONPATH=/tmp/s17/$t timeout 400 python scripts/bench_draft_budget.py --batch-sizes 1 --num-prompts 40 --warmup 1 2>&1)
    ratio=$(echo "$r" | grep -E "auto / best" | sed -E "s/.*\(([a-z0-9:]+)\): ([0-9.]+); auto chose (.*)/\1 \2 \3/")
    gap=$(echo "$r" | grep "ms per step" | python -c "
import sys,re
s=sys.stdin.read(); a=re.search(r'auto chain:8 ([0-9.]+)', s); f=re.search(r'chain:8 chain:8 ([0-9.]+)', s)
print(f'gap {1e3*(float(a.group(1))-float(f.group(1))):.0f}us' if a and f else 'gap ?')")
    tab=$(echo "$r" | grep "measured cost table" | sed -E "s/.*'n=1 chain:8 L=128': ([0-9.]+).*/c8table \1/")
    echo "round $i $t $ratio $gap $tab" | tee -a $2
  done
done
