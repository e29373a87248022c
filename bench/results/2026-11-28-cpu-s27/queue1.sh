# c16_one.py at concurrency 16 (5 rounds, 1 ms host work a step), ABBA: the code before (HEAD b9e97a1's dflash_trt in
# /tmp/s27old) and the working tree then (variant A: a probe's regret over its chance, _chance; tree measurements as before), 6 pairs
cd /work/main
for v in old new new old old new new old old new new old; do
  if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
  echo "== c16 $v"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 | grep "c16 a\|SUMMARY\|    draft k\|    probe"
done
