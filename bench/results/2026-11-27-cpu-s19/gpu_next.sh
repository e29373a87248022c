#!/usr/bin/env bash
# For the next session with a GPU (written in the nineteenth session, which had none; not run). Copy into .whl/ with
# the wheels (../2026-11-27-gpu-h200-s12/wheels.sh, then drop the tokenizers / safetensors / huggingface_hub / hf_xet
# wheels, keep httpx2 / httpcore2), the mixed prompts (python ../2026-11-27-gpu-h200-s18/mixed320.py .whl/mixed320.jsonl)
# and the eighteenth session's final package (mkdir -p .whl/old; git archive d6e40f9 dflash_trt | tar -x -C .whl/old); run as
# `TAG=s20r1 bash .whl/gpu_next.sh` with carry [".whl"] on nvidia-h200.
# What it answers: auto / best fixed on the current code (the engine's global tables, the trees calibrated together,
# shapes captured up front) beside d6e40f9, and the new host_ms lines: where auto's extra ~134 us a window at batch 1
# comes from (between windows vs before a generate() call's first window, auto vs tree:32).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHON=python3 PYTHONUNBUFFERED=1
TAG=${TAG:-s20r1}; R=/tmp/$TAG; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp $TAG; }
date > $R/env.txt; git log --oneline -1 >> $R/env.txt; nvidia-smi -L >> $R/env.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
export DFLASH_PLUGINS_LIB=$PWD/plugins/build/libdflash_plugins.so
el start
bench() {  # name, package dir, extra args (this bench script for both packages: its host-ms timing wraps runner methods
  # both have)
  PYTHONPATH=$2:/tmp/site timeout ${BT:-100} python3 scripts/bench_draft_budget.py --device cuda "${@:3}" --output $R/db_$1 > $R/db_$1.txt 2>&1
  echo "rc $?" >> $R/db_$1.txt
  echo "$1: $(grep -oE "auto / best fixed \([a-z0-9:]+\): [0-9.]+|rc [0-9]+" $R/db_$1.txt | tr '\n' ' ')"
  grep -E "host ms" $R/db_$1.txt | cut -c1-400; el $1
}
for v in new old new; do P=$PWD; [ $v = old ] && P=$PWD/.whl/old
  bench b1_$v $P --num-prompts 80 --batch-sizes 1 --warmup 4; done
bench mixed_new $PWD --dataset .whl/mixed320.jsonl --num-prompts 320 --batch-sizes 8,16 --warmup 2
PYTHONPATH=$PWD:/tmp/site timeout 120 python3 -m pytest -q -m gpu tests/test_step.py tests/test_budget.py > $R/gpu_tests.txt 2>&1
tail -3 $R/gpu_tests.txt; el done
