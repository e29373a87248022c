#!/bin/bash
# alternating pairs: the session's start (OLD, 9412d27) and this session's code (NEW), the standard draft-budget bench
for i in 1 2 3; do
  for v in OLD NEW; do
    [ $i = 2 ] && [ $v = OLD ] && continue
    run() { d=/tmp/s20/$(echo $1 | tr A-Z a-z | sed 's/old/base/'); (cd $d && PYTHONPATH=$d python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output /tmp/s20/ab_$1_$2 > /tmp/s20/ab_$1_$2.txt 2>&1); echo "$1 $2 $(grep -oE 'auto / best fixed \([a-z0-9:]+\): [0-9.]+' /tmp/s20/ab_$1_$2.txt | tr '\n' ' ') $(date +%T)"; }
    run $v $i
    [ $i = 2 ] && run OLD $i
  done
done
