#!/usr/bin/env bash
# GPU run 2 (session 18, H200): the server Pareto (current code; run 1's failed: the openai wheel's httpx2 was not carried);
# the draft-budget bench at batch 8 / 16 over 320 mixed prompts (the four EAGLE sets interleaved, .whl/mixed320.jsonl)
# for the current code and 98afaa8; batch 1 again for both (80 GSM8K prompts).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHON=python3 PYTHONUNBUFFERED=1
TAG=${TAG:-s18r2}; R=/tmp/$TAG; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp $TAG; }
date > $R/env.txt; cp .whl/run*.sh $R/; git log --oneline -1 >> $R/env.txt; nvidia-smi -L >> $R/env.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
export DFLASH_PLUGINS_LIB=$PWD/plugins/build/libdflash_plugins.so
el serving
PYTHONPATH=$PWD:/tmp/site timeout ${ST:-150} python3 scripts/bench_openai_server.py --device cuda --modes ar,chain:8,chain:16,tree:32,auto \
  --concurrency 1,2,4,8,16 --rounds 3 --num-prompts 16 --max-tokens 64 --warmup-rounds 1 --output $R/serving > $R/bench_serving.txt 2>&1
echo "rc $?" >> $R/bench_serving.txt; grep -E "\| auto|rc |Throughput" $R/bench_serving.txt | cut -c1-240
el mixed
bench() {  # name, package dir, extra args
  PYTHONPATH=$2:/tmp/site timeout 100 python3 scripts/bench_draft_budget.py --device cuda "${@:3}" --output $R/db_$1 > $R/db_$1.txt 2>&1
  echo "rc $?" >> $R/db_$1.txt; echo "$1: $(grep -oE "auto / best fixed \([a-z0-9:]+\): [0-9.]+|rc [0-9]+" $R/db_$1.txt | tr '\n' ' ')"; el $1
}
for v in new old; do P=$PWD; [ $v = old ] && P=$PWD/.whl/old
  bench mixed_$v $P --dataset .whl/mixed320.jsonl --num-prompts 320 --batch-sizes 8,16 --warmup 2; done
for v in new old; do P=$PWD; [ $v = old ] && P=$PWD/.whl/old
  bench b1_$v $P --num-prompts 80 --batch-sizes 1 --warmup 4; done
el done
