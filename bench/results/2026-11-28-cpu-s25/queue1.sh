# ABBA: bench_draft_budget batch 1 and 8 (40 prompts, warmup 1) with HEAD's dflash_trt (prior 0.7: /tmp/s25old) and
# the working tree (prior 0.8), alternating, twice
cd /work/main
B=bench/results/2026-11-28-cpu-s25
for v in old new new old; do
  if [ $v = old ]; then P=/tmp/s25old:.; else P=.; fi
  n=$(ls -d $B/bench-$v-* 2>/dev/null | wc -l)
  PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $B/bench-$v-$((n+1)) > $B/bench-$v-$((n+1)).log 2>&1
  echo "$v $((n+1)) done $(date +%T)"
done
