#!/bin/bash
# f9fb6f0 (tree optimism, /tmp/s28new) against a0486df (/tmp/s28base): 4 more standard-bench pairs (runs 9-16, ABBA),
# then c = 16 in-process (s24's c16_one.py 5 0.001 16), 4 pairs, then the server Pareto, 2 pairs.
# Run from the repository root: bash bench/results/2026-11-28-cpu-s28/queue3.sh > bench/results/2026-11-28-cpu-s28/queue3.txt 2>&1
# (stopped after the bench part; queue3b.sh runs the rest)
R=bench/results/2026-11-28-cpu-s28
for run in base-9 new-10 new-11 base-12 base-13 new-14 new-15 base-16; do
  case $run in base*) P=/tmp/s28base:. ;; *) P=/tmp/s28new:. ;; esac
  echo "=== $run $(date -u +%H:%M:%S)"
  PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$run > $R/bench-$run.log 2>&1
  grep "auto / best fixed" $R/bench-$run.log | cut -c1-60
done
for run in new base base new new base base new; do
  case $run in base*) P=/tmp/s28base:. ;; *) P=/tmp/s28new:. ;; esac
  echo "c16 $run $(PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 2>&1 | tail -1)"
done
for run in new-a base-a base-b new-b; do
  case $run in base*) P=/tmp/s28base:. ;; *) P=/tmp/s28new:. ;; esac
  PYTHONPATH=$P python scripts/bench_openai_server.py --modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $R/pareto-$run > $R/pareto-$run.log 2>&1
  echo "pareto $run done $(date -u +%T) rc $?"
done
echo DONE
