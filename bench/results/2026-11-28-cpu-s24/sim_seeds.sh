# replays (scripts/sim_draft_budget.py --seed) of the code before (/tmp/s24old: d174fbb's dflash_trt) and three of the
# variants tried (/tmp/s24<name>: d174fbb with the patch in attempts/ applied; global: bf153fa), on sim-fresh's traces
# and costs, c = 1 / 8 / 16 continuous, window times x exp(N(0, 0.05)) seeded 1..8: auto / AR per seed
cd /work/main
d=bench/results/2026-11-28-cpu-s24/sim-fresh
for v in old global yield arspeed; do
  for s in 1 2 3 4 5 6 7 8; do
    echo "$v $s $(PYTHONPATH=/tmp/s24$v:. python scripts/sim_draft_budget.py --traces $d/traces.json --costs $d/costs.json --batch-sizes 1,8,16 --continuous --time-noise 0.05 --seed $s --output /tmp/sim-seed 2>&1 | grep concurrency | sed 's/.*auto \([0-9.]*\)x.*/\1/' | tr '\n' ' ')"
  done
done
