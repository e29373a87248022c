#!/usr/bin/env bash
# GPU run of 2026-11-26 (session 3, run 4): the draft budgets side by side, one run, three versions of the budget:
# new (8b3028e: choice ahead fits guessed caps + observations taken in every 16 steps), old (6591adc: the session's
# start), ahead (2eac85d: the choice ahead only); the GPU step/budget tests of the new code first.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
R=/tmp/r4; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp r4; }
date > $R/env.txt; cp .whl/run.sh $R/
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
export DFLASH_PLUGINS_LIB=$PWD/plugins/build/libdflash_plugins.so PYTHON=python3 PYTHONUNBUFFERED=1
el gpu-tests
PYTHONPATH=$PWD:/tmp/site timeout 60 python3 -m pytest -q -m gpu -rs tests/test_step.py tests/test_budget.py \
  > $R/gpu_tests.log 2>&1; echo "rc $?" >> $R/gpu_tests.log; tail -2 $R/gpu_tests.log
for v in new old ahead; do
  el "budget $v"
  if [ $v = new ]; then P=$PWD; else P=$PWD/.whl/variants/$v; fi
  PYTHONPATH=$P:/tmp/site timeout 75 python3 scripts/bench_draft_budget.py --device cuda --num-prompts 80 \
    --batch-sizes 1,8,16 --warmup 4 --output $R/draft_budget_$v > $R/bench_draft_budget_$v.txt 2>&1
  echo "rc $?" >> $R/bench_draft_budget_$v.txt
  PYTHONPATH=$P:/tmp/site python3 -c "import dflash_trt; print(dflash_trt.__file__)" >> $R/bench_draft_budget_$v.txt 2>&1 || true
  grep -E "steady|rc " $R/bench_draft_budget_$v.txt | grep -oE "auto / best fixed \([a-z0-9:]+\): [0-9.]+|rc [0-9]+" | tr '\n' ' '; echo
done
el done
