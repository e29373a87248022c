#!/usr/bin/env bash
# GPU run of 2026-11-26 (session 2, run 1): cost table timed as windows run, fresh prefill (causal attention).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHON=python3 PYTHONUNBUFFERED=1
R=/tmp/r; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp r; }
date > $R/env.txt; nvidia-smi >> $R/env.txt 2>&1; git log --oneline -1 >> $R/env.txt 2>&1; git status --short >> $R/env.txt 2>&1
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.get_device_name())" >> $R/env.txt 2>&1
cp .whl/run.sh $R/
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; pack; }
el gpu-tests
timeout 100 python3 -m pytest -q -m gpu -rs tests/test_step.py tests/test_models.py --durations=5 > $R/gpu_tests.log 2>&1; echo "rc $?" >> $R/gpu_tests.log
el prefill
timeout 60 python3 scripts/bench_step.py --prefill 6 --batch-sizes 1,4 --prompt-len 512 > $R/bench_prefill.txt 2>&1; echo "rc $?" >> $R/bench_prefill.txt
timeout 30 python3 scripts/bench_step.py --prefill 6 --batch-sizes 1,4 --prompt-len 100 --tiny >> $R/bench_prefill.txt 2>&1; echo "rc $?" >> $R/bench_prefill.txt
el budget
timeout 100 python3 scripts/bench_draft_budget.py --device cuda --num-prompts 80 --batch-sizes 1,8,16 --warmup 4 \
  --output $R/draft_budget > $R/bench_draft_budget.txt 2>&1; echo "rc $?" >> $R/bench_draft_budget.txt
el serving
timeout 80 python3 scripts/bench_openai_server.py --device cuda --modes ar,chain:8,chain:16,tree:32,auto \
  --concurrency 1,2,4,8,16 --rounds 2 --num-prompts 16 --max-tokens 64 --output $R/serving > $R/bench_serving.txt 2>&1
echo "rc $?" >> $R/bench_serving.txt
el done
