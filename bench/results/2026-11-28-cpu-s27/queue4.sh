# s25's cold_c8.py (fresh engine, 40 prompts, c = 8 continuous, 1 ms host work a step) at 128 and 64 tokens, the
# working tree (variant B, new) and HEAD b9e97a1's dflash_trt (/tmp/s27old, old), order alternating by run: 4 pairs at
# 128 tokens, 3 at 64 (queue3.sh's own cold runs printed only their last line, the calibration: redone here)
cd /work/main
for t in 128 64; do
  for i in 1 2 3 4; do
    if [ $t = 64 ] && [ $i = 4 ]; then break; fi
    if [ $((i % 2)) = 1 ]; then order="old new"; else order="new old"; fi
    for v in $order; do
      if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
      echo "== $v TOKENS=$t"; TOKENS=$t PYTHONPATH=$P python bench/results/2026-11-28-cpu-s25/cold_c8.py $i 8 2>&1 | grep -A2 "^run"
    done
  done
done
echo DONE4
