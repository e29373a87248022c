#!/usr/bin/env bash
# GPU run of 2026-11-26 (session 2, run 2): GPU tests (bf16 near-tie rule), where auto's window time goes.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHON=python3 PYTHONUNBUFFERED=1
R=/tmp/r; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp r; }
date > $R/env.txt; git log --oneline -1 >> $R/env.txt 2>&1; git status --short >> $R/env.txt 2>&1
cp .whl/run.sh .whl/prof_gpu.py $R/
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; pack; }
el gpu-tests
timeout 100 python3 -m pytest -q -m gpu -rs tests/test_step.py tests/test_models.py --durations=5 > $R/gpu_tests.log 2>&1; echo "rc $?" >> $R/gpu_tests.log
el prof1
timeout 80 python3 .whl/prof_gpu.py 1 > $R/prof_b1.txt 2>&1; echo "rc $?" >> $R/prof_b1.txt
el prof8
timeout 60 python3 .whl/prof_gpu.py 8 > $R/prof_b8.txt 2>&1; echo "rc $?" >> $R/prof_b8.txt
el done
