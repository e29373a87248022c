# variant A with EXPLORE_SPREAD 0.5 (new: the working tree, uncommitted; chance 0.83 / 0.66 / 0.58 / 0.17 at 0.9 /
# 0.8 / 0.76 / 0.5x AR's rate) against b9e97a1's dflash_trt (/tmp/s27old): the standard bench, 3 ABBA pairs; then
# c16_one.py at 16, 6 pairs. Decided before it ran: kept only if c = 16 gains >= 1 % (4+ of 6 pairs better), batch 8's
# auto / AR is within 1 % of old's or better and batch 1's not worse by more than 1 %
cd /work/main
R=bench/results/2026-11-28-cpu-s27
i=20
for v in old new new old old new; do
  i=$((i+1))
  if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
  echo "== bench $v $i"; PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$v-s05-$i > $R/bench-$v-s05-$i.log 2>&1
  grep "auto / best" $R/bench-$v-s05-$i.log | cut -c1-60
  grep "^batch 8 (cpu" $R/bench-$v-s05-$i.log | grep -o "auto [0-9.]* tok/s ([0-9.]*x AR"
done
for v in new old old new new old old new new old old new; do
  if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
  echo "== c16 $v"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 | grep "c16 a\|SUMMARY\|    draft k\|    probe"
done
echo DONE7
