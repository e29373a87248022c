# the standard bench at batch 8 only, the code before (d174fbb, /tmp/s24old) and HEAD, ABBA
cd /work/main
for v in old new new old; do
  if [ $v = old ]; then P=/tmp/s24old:.; else P=.; fi
  echo "== b8 $v"; PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 8 --num-prompts 40 --warmup 1 --output /tmp/s24b8-$v 2>&1 | grep "auto / best\|(cpu, host loop)"
done
