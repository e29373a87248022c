#!/usr/bin/env bash
# GPU run 2 (session 12): GPU step/budget tests; the prefill probe at batch 8 (current, current without deferral, s5 code)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHON=python3 PYTHONUNBUFFERED=1
TAG=s12r2; R=/tmp/$TAG; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp $TAG; }
date > $R/env.txt; cp .whl/run2.sh .whl/probe.py $R/; git log --oneline -1 >> $R/env.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
export DFLASH_PLUGINS_LIB=$PWD/plugins/build/libdflash_plugins.so
el probe
for v in current nodefer; do PYTHONPATH=$PWD:/tmp/site timeout 70 python3 .whl/probe.py cuda 8 10 $v 2>&1 | tee $R/probe_$v.txt | grep -v Warn; el probe-$v; done
PYTHONPATH=$PWD/.whl/old:/tmp/site timeout 70 python3 .whl/probe.py cuda 8 10 2>&1 | tee $R/probe_old.txt | grep -v Warn; el probe-old
export PYTHONPATH=$PWD:/tmp/site
timeout 100 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/test_step.py tests/test_budget.py > $R/gpu_tests.log 2>&1
echo "rc $?" >> $R/gpu_tests.log; tail -3 $R/gpu_tests.log; grep -E "^FAILED|^E   " $R/gpu_tests.log | head -8
el done
