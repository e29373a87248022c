#!/usr/bin/env bash
# GPU run of 2026-11-26 (session 3, run 3): code 16823cb: where an auto window's extra time goes (prof_gpu.py:
# scheduler phases per window, tree:32 vs auto, batch 1 and 8; choose-ahead hits).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHON=python3 PYTHONUNBUFFERED=1
R=/tmp/r3; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp r3; }
date > $R/env.txt; cp .whl/run.sh .whl/prof_gpu.py $R/
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
el prof1
timeout 75 python3 .whl/prof_gpu.py 1 tree:32 > $R/prof_b1.txt 2>&1; echo "rc $?" >> $R/prof_b1.txt; head -4 $R/prof_b1.txt
el prof8
timeout 60 python3 .whl/prof_gpu.py 8 tree:32 > $R/prof_b8.txt 2>&1; echo "rc $?" >> $R/prof_b8.txt; head -4 $R/prof_b8.txt
el done
