# cold_c8.py at 128 tokens, auto first (odd runs), base vs FEED=1 (drafter always fed) alternating
cd /work/main
B=bench/results/2026-11-28-cpu-s26
for x in feed:1 base:1 base:3 feed:3 feed:5 base:5; do
  v=${x%:*}; r=${x#*:}; f=; [ $v = feed ] && f=1
  FEED=$f TOKENS=128 PYTHONPATH=. python $B/cold_c8.py $r 8 2>&1 | tail -3
done
