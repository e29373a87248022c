#!/usr/bin/env bash
# GPU run of 2026-11-26 (session 4, run 5), the session's final code: the GPU step/budget tests (pipelined windows,
# the prefill refused while a launched window is unread), then the OpenAI-server Pareto again (second sample of run 4).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHON=python3 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
R=/tmp/r5; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp r5; }
date > $R/env.txt; cp .whl/run.sh $R/; git log --oneline -1 >> $R/env.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
export DFLASH_PLUGINS_LIB=$PWD/plugins/build/libdflash_plugins.so
el gpu-tests
timeout 70 python3 -m pytest -q -m gpu -rs tests/test_step.py tests/test_budget.py > $R/gpu_tests.log 2>&1
echo "rc $?" >> $R/gpu_tests.log; tail -3 $R/gpu_tests.log
el serving
timeout 150 python3 scripts/bench_openai_server.py --device cuda --modes ar,chain:16,tree:32,auto \
  --concurrency 1,2,4,8,16 --rounds 3 --num-prompts 16 --max-tokens 64 --warmup-rounds 1 --output $R/serving > $R/bench_serving.txt 2>&1
echo "rc $?" >> $R/bench_serving.txt; grep -E "\| auto|rc " $R/bench_serving.txt | cut -c1-200
el done
