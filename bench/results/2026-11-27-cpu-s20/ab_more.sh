#!/bin/bash
run() { d=/tmp/s20/$(echo $1 | tr A-Z a-z | sed 's/old/base/'); (cd $d && PYTHONPATH=$d python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output /tmp/s20/ab_$1_$2 > /tmp/s20/ab_$1_$2.txt 2>&1); echo "$1 $2 $(grep -oE 'auto / best fixed \([a-z0-9:]+\): [0-9.]+' /tmp/s20/ab_$1_$2.txt | tr '\n' ' ') $(date +%T)"; }
run OLD 4; run NEW 4; run NEW 5; run OLD 5
