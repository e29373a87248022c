# variant A as committed (new = the working tree at 3rd commit of the session: probes weighed by their chance, tree
# measurements not) against b9e97a1's dflash_trt (/tmp/s27old): 1. the standard bench, 3 ABBA pairs (batch 1 and 8);
# 2. c16_one.py at 16, 3 pairs; 3. the server Pareto, 2 pairs
cd /work/main
R=bench/results/2026-11-28-cpu-s27
i=10
for v in new old old new new old; do
  i=$((i+1))
  if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
  echo "== bench $v $i"; PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$v-$i > $R/bench-$v-$i.log 2>&1
  grep "auto / best" $R/bench-$v-$i.log | cut -c1-60
done
for v in old new new old old new; do
  if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
  echo "== c16 $v"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 | grep "c16 a\|SUMMARY\|    draft k\|    probe"
done
for pv in newA1 oldA1 oldA2 newA2; do
  case $pv in old*) P=/tmp/s27old:. ;; *) P=. ;; esac
  PYTHONPATH=$P python scripts/bench_openai_server.py --modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $R/pareto-$pv > $R/pareto-$pv.log 2>&1
  echo "pareto $pv done $(date +%T) rc $?"
done
echo DONE6
