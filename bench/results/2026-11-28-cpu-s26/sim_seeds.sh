# replays (scripts/sim_draft_budget.py --seed) of the code before (/tmp/s26old: 0ecd14b's dflash_trt) and the working
# tree (exploration charged what it lost), on s24's sim-fresh traces and costs, c = 1 / 8 / 16 continuous, window
# times x exp(N(0, 0.05)) seeded 1..8: auto / AR per seed
cd /work/main
d=bench/results/2026-11-28-cpu-s24/sim-fresh
for v in old new; do
  if [ $v = old ]; then P=/tmp/s26old:.; else P=.; fi
  for s in 1 2 3 4 5 6 7 8; do
    echo "$v $s $(PYTHONPATH=$P python scripts/sim_draft_budget.py --traces $d/traces.json --costs $d/costs.json --batch-sizes 1,8,16 --continuous --time-noise 0.05 --seed $s --output /tmp/sim-seed 2>&1 | grep concurrency | sed 's/.*auto \([0-9.]*\)x.*/\1/' | tr '\n' ' ')"
  done
done
