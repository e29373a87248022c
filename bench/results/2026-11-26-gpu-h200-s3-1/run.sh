#!/usr/bin/env bash
# GPU run of 2026-11-26 (session 3, run 1): code 6591adc (cost table by cache length, switch pricing, tree candidates
# per size): every gpu-marked test, draft budgets at batch 1/8/16, server Pareto (3 rounds).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHON=python3 PYTHONUNBUFFERED=1
R=/tmp/r; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp r; }
date > $R/env.txt; nvidia-smi -L >> $R/env.txt 2>&1
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" >> $R/env.txt 2>&1
cp .whl/run.sh $R/
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
el gpu-tests
timeout 120 python3 -m pytest -q -m gpu -rs tests --durations=8 > $R/gpu_tests.log 2>&1; echo "rc $?" >> $R/gpu_tests.log
tail -3 $R/gpu_tests.log
el budget
timeout 120 python3 scripts/bench_draft_budget.py --device cuda --num-prompts 80 --batch-sizes 1,8,16 --warmup 4 \
  --output $R/draft_budget > $R/bench_draft_budget.txt 2>&1; echo "rc $?" >> $R/bench_draft_budget.txt
grep -E "auto / best|rc " $R/bench_draft_budget.txt
el serving
timeout 130 python3 scripts/bench_openai_server.py --device cuda --modes ar,chain:8,tree:32,auto \
  --concurrency 1,2,4,8,16 --rounds 3 --num-prompts 16 --max-tokens 64 --output $R/serving > $R/bench_serving.txt 2>&1
echo "rc $?" >> $R/bench_serving.txt; tail -12 $R/bench_serving.txt
el done
