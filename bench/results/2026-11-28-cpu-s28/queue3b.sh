#!/bin/bash
# queue3.sh's c = 16 and server parts again (queue3 kept only c16_one's last line, a debug line: stopped there):
# f9fb6f0 (/tmp/s28new) against a0486df (/tmp/s28base), c16_one.py 5 0.001 16, 4 pairs; then the server Pareto, 2 pairs.
R=bench/results/2026-11-28-cpu-s28
for v in new old old new new old old new; do
  case $v in old) P=/tmp/s28base:. ;; *) P=/tmp/s28new:. ;; esac
  echo "== c16 $v"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 | grep "c16 a\|SUMMARY\|    draft k\|    probe"
done
for run in new-a base-a base-b new-b; do
  case $run in base*) P=/tmp/s28base:. ;; *) P=/tmp/s28new:. ;; esac
  PYTHONPATH=$P python scripts/bench_openai_server.py --modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $R/pareto-$run > $R/pareto-$run.log 2>&1
  echo "pareto $run done $(date -u +%T) rc $?"
done
echo DONE
