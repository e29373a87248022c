#!/usr/bin/env bash
# GPU run 3 (session 12): where auto's time outside windows goes at batch 8 (probe2), the draft-budget bench at batch 8
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHON=python3 PYTHONUNBUFFERED=1
TAG=s12r3; R=/tmp/$TAG; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp $TAG; }
date > $R/env.txt; cp .whl/run3.sh .whl/probe2.py $R/; git log --oneline -1 >> $R/env.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
export DFLASH_PLUGINS_LIB=$PWD/plugins/build/libdflash_plugins.so PYTHONPATH=$PWD:/tmp/site
el start
timeout 60 python3 .whl/probe2.py cuda 8 10 > $R/probe2_current.txt 2>&1; grep -v Warn $R/probe2_current.txt | cut -c1-400; el probe2
timeout 70 python3 scripts/bench_draft_budget.py --device cuda --num-prompts 80 --batch-sizes 8 --warmup 4 \
  --output $R/draft_budget > $R/bench_draft_budget.txt 2>&1; echo "rc $?"
grep -oE "auto / best fixed \([a-z0-9:]+\): [0-9.]+" $R/bench_draft_budget.txt | tr '\n' ' '; echo; el bench
timeout 60 python3 .whl/probe2.py cuda 8 10 nodefer > $R/probe2_nodefer.txt 2>&1; grep -v Warn $R/probe2_nodefer.txt | cut -c1-400; el done
