# the share backoff by batch bucket (working tree) at c = 16: c16_one.py, three more pairs, ABBA order
cd /work/main
for v in new old old new new old; do
  if [ $v = old ]; then P=/tmp/s24old:.; else P=.; fi
  echo "== c16 $v"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 5 | grep "c16 a\|SUMMARY"
done
