# the kept setting (HEAD, new-s05) against b9e97a1's dflash_trt (/tmp/s27old, old-s05): 3 more standard-bench pairs
cd /work/main
R=bench/results/2026-11-28-cpu-s27
i=30
for v in new old old new new old; do
  i=$((i+1))
  if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
  echo "== bench $v $i"; PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$v-s05-$i > $R/bench-$v-s05-$i.log 2>&1
  grep "auto / best" $R/bench-$v-s05-$i.log | cut -c1-60
done
echo DONE9
