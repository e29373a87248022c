#!/bin/bash
# Thirtieth session, the probe take-in (0f40e4e, "fin") against b56672f ("base": the budget as at 1d9d473), ABBA by
# pair, code copies in /tmp/s30/{base,fin} (git archive REV dflash_trt). Nothing else ran meanwhile.
cd /work/main
R=bench/results/2026-12-07-cpu-s30
for i in 1 2 3; do
  if [ $((i % 2)) = 1 ]; then order="base fin"; else order="fin base"; fi
  for v in $order; do
    echo "== bench $v $i $(date +%T)"
    PYTHONPATH=/tmp/s30/$v:. python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$v-$i > $R/bench-$v-$i.log 2>&1
  done
done
for i in a b; do
  if [ $i = a ]; then order="base fin"; else order="fin base"; fi
  for v in $order; do
    echo "== pareto $v $i $(date +%T)"
    PYTHONPATH=/tmp/s30/$v:. python scripts/bench_openai_server.py --modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $R/pareto-$v-$i > $R/pareto-$v-$i.log 2>&1
  done
done
for i in 1 2; do
  if [ $i = 1 ]; then order="base fin"; else order="fin base"; fi
  for v in $order; do
    echo "== c16 $v $i $(date +%T)"
    PYTHONPATH=/tmp/s30/$v:. python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 2>&1 | grep "c16 a\|SUMMARY\|    probe"
  done
done
echo "DONE $(date +%T)"
