#!/usr/bin/env bash
# GPU run 3 (session 18, H200): the draft-budget bench with every mode's graphs captured up front (the bench's new
# default, as the servers do): batch 8 / 16 over the 320 mixed prompts, then batch 1 (80 GSM8K prompts); current code.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHON=python3 PYTHONUNBUFFERED=1
TAG=${TAG:-s18r3}; R=/tmp/$TAG; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp $TAG; }
date > $R/env.txt; git log --oneline -1 >> $R/env.txt; nvidia-smi -L >> $R/env.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
export DFLASH_PLUGINS_LIB=$PWD/plugins/build/libdflash_plugins.so PYTHONPATH=$PWD:/tmp/site
el start
bench() {
  timeout 80 python3 scripts/bench_draft_budget.py --device cuda "${@:2}" --output $R/db_$1 > $R/db_$1.txt 2>&1
  echo "rc $?" >> $R/db_$1.txt; echo "$1: $(grep -oE "auto / best fixed \([a-z0-9:]+\): [0-9.]+|rc [0-9]+|[0-9]+ CUDA graphs captured up front in [0-9.]+ s" $R/db_$1.txt | tr '\n' ' ')"; el $1
}
bench mixed_upfront --dataset .whl/mixed320.jsonl --num-prompts 320 --batch-sizes 8,16 --warmup 2
bench b1_upfront --num-prompts 80 --batch-sizes 1 --warmup 4
