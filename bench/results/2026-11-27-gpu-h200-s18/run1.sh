#!/usr/bin/env bash
# GPU run 1 (session 18, H200): the GPU step/budget tests on the current code; the draft-budget bench at batch 1 / 8 / 16,
# current code (HEAD) and the seventeenth session's start (98afaa8, .whl/old/dflash_trt from `git archive`) alternating,
# same bench script; the server Pareto (current code) as in the twelfth session's run 1.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHON=python3 PYTHONUNBUFFERED=1
TAG=${TAG:-s18r1}; R=/tmp/$TAG; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp $TAG; }
date > $R/env.txt; cp .whl/run*.sh $R/; git log --oneline -1 >> $R/env.txt; nvidia-smi -L >> $R/env.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
export DFLASH_PLUGINS_LIB=$PWD/plugins/build/libdflash_plugins.so
PYTHONPATH=$PWD:/tmp/site python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.get_device_name())" | tee -a $R/env.txt
el tests
PYTHONPATH=$PWD:/tmp/site timeout ${TT:-80} python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/test_step.py tests/test_budget.py > $R/gpu_tests.log 2>&1
echo "rc $?" >> $R/gpu_tests.log; tail -2 $R/gpu_tests.log; grep -E "^FAILED|^E   " $R/gpu_tests.log | head -8
el budget
for run in ${RUNS:-new1 old1 new2 old2}; do
  P=$PWD; case $run in old*) P=$PWD/.whl/old;; esac
  PYTHONPATH=$P:/tmp/site timeout 100 python3 scripts/bench_draft_budget.py --device cuda --num-prompts 80 --batch-sizes 1,8,16 \
    --warmup 4 --output $R/db_$run > $R/db_$run.txt 2>&1; echo "rc $?" >> $R/db_$run.txt
  echo "$run: $(grep -oE "auto / best fixed \([a-z0-9:]+\): [0-9.]+|rc [0-9]+" $R/db_$run.txt | tr '\n' ' ')"; el $run
done
PYTHONPATH=$PWD:/tmp/site timeout ${ST:-150} python3 scripts/bench_openai_server.py --device cuda --modes ar,chain:8,chain:16,tree:32,auto \
  --concurrency 1,2,4,8,16 --rounds 3 --num-prompts 16 --max-tokens 64 --warmup-rounds 1 --output $R/serving > $R/bench_serving.txt 2>&1
echo "rc $?" >> $R/bench_serving.txt; grep -E "\| auto|rc |Throughput" $R/bench_serving.txt | cut -c1-240
el done
