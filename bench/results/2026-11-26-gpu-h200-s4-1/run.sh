#!/usr/bin/env bash
# GPU run of 2026-11-26 (session 4, run 1), code b8e60d4: (a) prof2.py: per-window timestamps + CUDA events, tree:32
# vs auto at batch 1 / 8, GC on and off: where auto's extra host time sits; (b) draft budgets with 8-step windows
# against 4-step windows, side by side in one run.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHON=python3 PYTHONUNBUFFERED=1
R=/tmp/r1; rm -rf $R; mkdir -p $R; pack() { tar czf $OUT/results.tar.gz -C /tmp r1; }
date > $R/env.txt; cp .whl/run.sh .whl/prof2.py $R/; git log --oneline -1 >> $R/env.txt
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/timeline.txt; pack; }
DFLASH_CUDA_ARCHS=90 scripts/build_plugins.sh > $R/build.log 2>&1 || echo BUILD FAILED
export DFLASH_PLUGINS_LIB=$PWD/plugins/build/libdflash_plugins.so
el prof1
timeout 60 python3 .whl/prof2.py 1 tree:32 32 base,nogc > $R/prof2_b1.txt 2>&1; echo "rc $?" >> $R/prof2_b1.txt
grep -E "^==|late per|idle" $R/prof2_b1.txt | head -6
el prof8
timeout 50 python3 .whl/prof2.py 8 tree:32 32 base > $R/prof2_b8.txt 2>&1; echo "rc $?" >> $R/prof2_b8.txt
for s in 8 4; do
  el "budget steps $s"
  timeout 70 python3 scripts/bench_draft_budget.py --device cuda --num-prompts 80 --batch-sizes 1,8 --warmup 4 \
    --steps-per-sync $s --output $R/draft_budget_s$s > $R/bench_draft_budget_s$s.txt 2>&1
  echo "rc $?" >> $R/bench_draft_budget_s$s.txt
  grep -E "steady|rc " $R/bench_draft_budget_s$s.txt | grep -oE "auto / best fixed \([a-z0-9:]+\): [0-9.]+|rc [0-9]+" | tr '\n' ' '; echo
done
el done
