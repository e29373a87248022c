#!/bin/bash
# abr.sh OUT N LEVELS ROUNDS A_DIR B_DIR: N alternating pairs of in-process server-like replays (the seventh session's
# replay.py: auto / AR per concurrency level) of two frozen trees A and B (git ls-files copies), one line per run in
# OUT/log.txt. Nothing else may run meanwhile (2 cores).
here=$(dirname "$(readlink -f "$0")")
out=$1; n=$2; lv=$3; rd=$4; A=$5; B=$6; mkdir -p "$out"
for i in $(seq 1 "$n"); do
  for v in A B; do
    if [ $v = A ]; then d=$A; else d=$B; fi
    r=$(cd "$d" && PYTHONPATH="$d" python "$here/../2026-11-26-cpu-draft-budget-s7/replay.py" "$lv" "$rd" 2>&1 | tail -1)
    echo "$v$i $r" | tee -a "$out/log.txt"
  done
done
