# c16_one.py at concurrency 4 (C=4, 1 ms host work per step), the code before (d174fbb, /tmp/s24old) and the working
# tree alternating, 4 rounds each; then once more at 16 (ABBA: the working tree first)
cd /work/main
for i in 1 2; do
  for v in old new; do
    if [ $v = old ]; then P=/tmp/s24old:.; else P=.; fi
    echo "== c4 $v $i"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 4 0.001 4 | grep "c4 a\|SUMMARY\|    draft k\|    probe"
  done
done
for v in new old; do
  if [ $v = old ]; then P=/tmp/s24old:.; else P=.; fi
  echo "== c16 $v 4"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 5 | grep "c16 a\|SUMMARY"
done
