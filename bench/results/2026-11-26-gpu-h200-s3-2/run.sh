#!/usr/bin/env bash
# GPU run of 2026-11-26 (session 3, run 2): code 6591adc: every gpu-marked test but the compiled one, then the compiled
# step on the GPU alone (run 1: it ran past 110 s) with tracebacks dumped after 45 s and Dynamo's recompile log.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHON=python3 PYTHONUNBUFFERED=1
R=/tmp/r2; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp r2; }
date > $R/env.txt; nproc >> $R/env.txt
cp .whl/run.sh $R/
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
el gpu-tests
timeout 100 python3 -m pytest -q -m gpu -rs tests --durations=10 \
  --deselect tests/test_compile.py::test_compiled_step_on_gpu_matches_ar > $R/gpu_tests.log 2>&1; echo "rc $?" >> $R/gpu_tests.log
tail -15 $R/gpu_tests.log
el compile
TORCH_LOGS=recompiles timeout 110 python3 -m pytest -q -s -o faulthandler_timeout=45 --durations=3 \
  tests/test_compile.py::test_compiled_step_on_gpu_matches_ar > $R/compile.log 2>&1; echo "rc $?" >> $R/compile.log
tail -5 $R/compile.log
el done
