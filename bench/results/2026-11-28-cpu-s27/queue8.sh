# the kept setting (spread 0.5, HEAD) against b9e97a1's dflash_trt (/tmp/s27old): the server Pareto, 2 pairs
# (new/old/old/new), then replays of the kept setting, seeds 1-4 (the old code's are queue2.txt's: same seeds, same
# traces and costs)
cd /work/main
R=bench/results/2026-11-28-cpu-s27
for pv in new05a old05a old05b new05b; do
  case $pv in old*) P=/tmp/s27old:. ;; *) P=. ;; esac
  PYTHONPATH=$P python scripts/bench_openai_server.py --modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $R/pareto-$pv > $R/pareto-$pv.log 2>&1
  echo "pareto $pv done $(date +%T) rc $?"
done
d=bench/results/2026-11-28-cpu-s24/sim-fresh
for s in 1 2 3 4; do
  echo "sim new05 $s $(PYTHONPATH=. python scripts/sim_draft_budget.py --traces $d/traces.json --costs $d/costs.json --batch-sizes 1,8,16 --continuous --time-noise 0.05 --seed $s --output /tmp/sim-seed 2>&1 | grep concurrency | sed 's/.*auto \([0-9.]*\)x.*/\1/' | tr '\n' ' ')"
done
echo DONE8
