# the cold start in the engine at c = 8: cold_c8.py, HEAD~'s 0.7 code (/tmp/s25old) and this session's (0.8), ABBA x 2
cd /work/main
B=bench/results/2026-11-28-cpu-s25
for x in old:0 new:0 new:1 old:1 old:2 new:2 new:3 old:3; do
  v=${x%:*}; r=${x#*:}
  if [ $v = old ]; then P=/tmp/s25old:.; else P=.; fi
  echo "$v $(PYTHONPATH=$P python $B/cold_c8.py $r 8 2>&1 | tail -1)"
done
