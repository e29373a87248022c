# cold_c8.py with auto first (odd run index: a fresh engine's first pass is auto's), 0.7 and 0.8 alternating, 4 each
cd /work/main
B=bench/results/2026-11-28-cpu-s25
for x in new:5 old:5 old:7 new:7 new:9 old:9 old:11 new:11; do
  v=${x%:*}; r=${x#*:}
  if [ $v = old ]; then P=/tmp/s25old:.; else P=.; fi
  echo "$v $(PYTHONPATH=$P python $B/cold_c8.py $r 8 2>&1 | tail -1)"
done
