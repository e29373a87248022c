# the share backoff by batch bucket (working tree): the standard bench at batch 8, ABBA with the code before
# (d174fbb, /tmp/s24old); then c16_one.py, one pair
cd /work/main
for v in new old old new; do
  if [ $v = old ]; then P=/tmp/s24old:.; else P=.; fi
  echo "== b8 $v"; PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 8 --num-prompts 40 --warmup 1 --output /tmp/s24b8-$v 2>&1 | grep "auto / best\|(cpu, host loop)"
done
for v in old new; do
  if [ $v = old ]; then P=/tmp/s24old:.; else P=.; fi
  echo "== c16 $v"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 5 | grep "c16 a\|SUMMARY"
done
