# s24's share backoff (attempts/share_backoff_global_bf153fa.patch, applied to the working tree) against HEAD
# (/tmp/s26old), in-process, one engine per run: c = 16 (5 rounds) 6 pairs ABBA, then c = 4 (4 rounds) 3 pairs
cd /work/main
B=bench/results/2026-11-28-cpu-s26
for v in new old old new new old old new new old old new; do
  if [ $v = old ]; then P=/tmp/s26old:.; else P=.; fi
  echo "== c16 $v"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 | grep "c16 a\|SUMMARY\|    draft k"
done
for v in old new new old old new; do
  if [ $v = old ]; then P=/tmp/s26old:.; else P=.; fi
  echo "== c4 $v"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 4 0.001 4 | grep "c4 a\|SUMMARY"
done
