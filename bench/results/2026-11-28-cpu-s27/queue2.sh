# variant B (the working tree: probes and tree measurements weighed at regret over chance, AutoBudget._exploring)
# against the code before (HEAD b9e97a1's dflash_trt in /tmp/s27old), one after another, nothing else running:
# 1. c16_one.py at concurrency 16 (5 rounds, 1 ms host work a step), 6 ABBA pairs
# 2. the standard bench (batch 1 and 8, 40 prompts), 2 ABBA pairs
# 3. replays (s24's sim-fresh traces and costs, c = 1 / 8 / 16 continuous, time noise 0.05), seeds 1-4
cd /work/main
R=bench/results/2026-11-28-cpu-s27
for v in old new new old old new new old old new new old; do
  if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
  echo "== c16 $v"; PYTHONPATH=$P python bench/results/2026-11-28-cpu-s24/c16_one.py 5 0.001 16 | grep "c16 a\|SUMMARY\|    draft k\|    probe"
done
i=0
for v in old new new old; do
  i=$((i+1))
  if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
  echo "== bench $v $i"; PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench-$v-$i > $R/bench-$v-$i.log 2>&1
  grep "auto / best" $R/bench-$v-$i.log
done
d=bench/results/2026-11-28-cpu-s24/sim-fresh
for v in old new; do
  if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
  for s in 1 2 3 4; do
    echo "sim $v $s $(PYTHONPATH=$P python scripts/sim_draft_budget.py --traces $d/traces.json --costs $d/costs.json --batch-sizes 1,8,16 --continuous --time-noise 0.05 --seed $s --output /tmp/sim-seed 2>&1 | grep concurrency | sed 's/.*auto \([0-9.]*\)x.*/\1/' | tr '\n' ' ')"
  done
done
echo DONE
