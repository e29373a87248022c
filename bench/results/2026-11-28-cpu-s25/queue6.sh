# cold_c8.py at 128 tokens per request (the replay's workload), auto's pass first, 0.7 (/tmp/s25old) and 0.8
# (/tmp/s25new: the same with DEFAULT_PRIOR 0.8) alternating, 3 each
cd /work/main
B=bench/results/2026-11-28-cpu-s25
for x in new:1 old:1 old:3 new:3 new:5 old:5; do
  v=${x%:*}; r=${x#*:}
  echo "$v $(TOKENS=128 PYTHONPATH=/tmp/s25$v:. python $B/cold_c8.py $r 8 2>&1 | tail -1)"
done
