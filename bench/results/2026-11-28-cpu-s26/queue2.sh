# c16_one.py at concurrency 16 (5 rounds, 1 ms of host work per step): the code before (HEAD 0ecd14b: /tmp/s26old)
# and the working tree (exploration charged what it lost) in ABBA order, 4 pairs
cd /work/main
B=bench/results/2026-11-28-cpu-s26
for v in old new new old old new new old; do
  if [ $v = old ]; then P=/tmp/s26old:.; else P=.; fi
  echo "== c16 $v"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 | grep "c16 a\|SUMMARY\|probe chain\|probe tree\|draft k"
done
