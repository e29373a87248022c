# the standard bench (batch 1 and 8, 40 prompts, one warm-up batch) with s24's share backoff (the working tree) and
# HEAD (/tmp/s26old), ABBA
cd /work/main
B=bench/results/2026-11-28-cpu-s26
for x in new:1 old:1 old:2 new:2; do
  v=${x%:*}; r=${x#*:}
  if [ $v = old ]; then P=/tmp/s26old:.; else P=.; fi
  PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $B/bench-$v-$r > $B/bench-$v-$r.log 2>&1
  echo "== $v $r"; grep -i "auto" $B/bench-$v-$r/README.md | head -8
done
