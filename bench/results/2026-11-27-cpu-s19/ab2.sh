#!/bin/bash
# alternating pairs: the eighteenth session's final code (OLD, d6e40f9) and this session's (NEW), the standard
# draft-budget bench at batch 1 and 8
for i in 1 2 3; do
  for v in OLD NEW; do
    [ $i = 2 ] && [ $v = OLD ] && continue  # (order: OLD NEW, NEW OLD, OLD NEW)
    run() { (cd /tmp/s19/$1 && PYTHONPATH=/tmp/s19/$1 python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output /tmp/s19/ab2_$1_$2 > /tmp/s19/ab2_$1_$2.txt 2>&1); echo "$1 $2 $(grep -oE 'auto / best fixed \([a-z0-9:]+\): [0-9.]+' /tmp/s19/ab2_$1_$2.txt | tr '\n' ' ')"; }
    run $v $i
    [ $i = 2 ] && run OLD $i
  done
done
