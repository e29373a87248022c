#!/usr/bin/env bash
# GPU run of 2026-11-26 (session 5, run 4): the session's final engine code (graphs captured at a server's start, plain
# AR windows for a held batch, the drafter's padding rows clamped): GPU tests, the server Pareto, the draft budgets.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHON=python3 PYTHONUNBUFFERED=1
R=/tmp/s5r4; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp s5r4; }
date > $R/env.txt; cp .whl/run.sh $R/; git log --oneline -1 >> $R/env.txt; nvidia-smi -L >> $R/env.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
export DFLASH_PLUGINS_LIB=$PWD/plugins/build/libdflash_plugins.so
export PYTHONPATH=$PWD:/tmp/site
el gpu-tests
timeout 150 python3 -m pytest -q -m gpu -rs tests/test_step.py tests/test_budget.py > $R/gpu_tests.log 2>&1
echo "rc $?" >> $R/gpu_tests.log; tail -3 $R/gpu_tests.log; grep -E "^FAILED|^E   " $R/gpu_tests.log | head -5
el serving
timeout 200 python3 scripts/bench_openai_server.py --device cuda --modes ar,chain:16,tree:32,auto \
  --concurrency 1,2,4,8,16 --rounds 3 --num-prompts 16 --max-tokens 64 --warmup-rounds 1 --output $R/serving > $R/bench_serving.txt 2>&1
echo "rc $?" >> $R/bench_serving.txt; grep -E "\| auto|rc |graphs|Throughput" $R/bench_serving.txt | cut -c1-240
el budget
timeout 90 python3 scripts/bench_draft_budget.py --device cuda --num-prompts 80 --batch-sizes 1,8,16 --warmup 4 \
  --output $R/draft_budget > $R/bench_draft_budget.txt 2>&1
echo "rc $?" >> $R/bench_draft_budget.txt
grep -E "auto / best|rc " $R/bench_draft_budget.txt | grep -oE "auto / best fixed \([a-z0-9:]+\): [0-9.]+|rc [0-9]+" | tr '\n' ' '; echo
el done
