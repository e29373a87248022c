#!/bin/bash
# 2 more server Pareto pairs, f9fb6f0 (/tmp/s28new) against a0486df (/tmp/s28base): base / new / new / base
R=bench/results/2026-11-28-cpu-s28
for run in base-c new-c new-d base-d; do
  case $run in base*) P=/tmp/s28base:. ;; *) P=/tmp/s28new:. ;; esac
  PYTHONPATH=$P python scripts/bench_openai_server.py --modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $R/pareto-$run > $R/pareto-$run.log 2>&1
  echo "pareto $run done $(date -u +%T) rc $?"
done
echo DONE
