#!/usr/bin/env bash
# GPU run of 2026-11-26 (session 4, run 2): pipelined windows (HEAD) vs the session's start (b8e60d4, .whl/variants/old):
# GPU step/budget tests of HEAD, then the draft budgets side by side (new, old, new again).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHON=python3 PYTHONUNBUFFERED=1
R=/tmp/r2; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp r2; }
date > $R/env.txt; cp .whl/run.sh .whl/prof2.py $R/; git log --oneline -1 >> $R/env.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
export DFLASH_PLUGINS_LIB=$PWD/plugins/build/libdflash_plugins.so
el gpu-tests
PYTHONPATH=$PWD:/tmp/site timeout 70 python3 -m pytest -q -m gpu -rs tests/test_step.py tests/test_budget.py \
  > $R/gpu_tests.log 2>&1; echo "rc $?" >> $R/gpu_tests.log; tail -3 $R/gpu_tests.log
for v in new old; do
  el "budget $v"
  if [ $v = new ]; then P=$PWD; else P=$PWD/.whl/variants/$v; fi
  PYTHONPATH=$P:/tmp/site timeout 80 python3 scripts/bench_draft_budget.py --device cuda --num-prompts 80 \
    --batch-sizes 1,8,16 --warmup 4 --output $R/draft_budget_$v > $R/bench_draft_budget_$v.txt 2>&1
  echo "rc $?" >> $R/bench_draft_budget_$v.txt
  grep -E "steady|rc " $R/bench_draft_budget_$v.txt | grep -oE "auto / best fixed \([a-z0-9:]+\): [0-9.]+|rc [0-9]+" | tr '\n' ' '; echo
done
el prof
PYTHONPATH=$PWD:/tmp/site timeout 40 python3 .whl/prof2.py 1 tree:32 32 base > $R/prof2_b1.txt 2>&1; echo "rc $?" >> $R/prof2_b1.txt
grep -E "^==|idle" $R/prof2_b1.txt | head -4
el done
