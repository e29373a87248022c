# more of the same at the committed change (new = HEAD's working tree; old = /tmp/s27old): the standard bench, 2 more
# pairs (new/old/old/new), then the server Pareto, 2 more pairs (old/new/new/old)
cd /work/main
R=bench/results/2026-11-28-cpu-s27
i=4
for v in new old old new; do
  i=$((i+1))
  if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
  echo "== bench $v $i"; PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$v-$i > $R/bench-$v-$i.log 2>&1
  grep "auto / best" $R/bench-$v-$i.log | cut -c1-60
done
for pv in old4 new4 new5 old5; do
  v=${pv%?}
  if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
  PYTHONPATH=$P python scripts/bench_openai_server.py --modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $R/pareto-$pv > $R/pareto-$pv.log 2>&1
  echo "pareto $pv done $(date +%T) rc $?"
done
echo DONE5
