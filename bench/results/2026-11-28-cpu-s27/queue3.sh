# after queue2: 1. the OpenAI server Pareto (the pair, ar / chain:8 / auto, c = 1-16, 16 prompts x 64 tokens, 3 rounds),
# alternating the working tree (variant B) and HEAD b9e97a1's dflash_trt (/tmp/s27old), 3 each;
# 2. s25's cold_c8.py (fresh engine, 40 prompts, c = 8 continuous, 1 ms host work a step) at 128 and 64 tokens,
# alternating old / new, 4 runs each at 128 and 3 at 64
# (its cold runs were stopped after 7: `tail -1` kept only their calibration line; redone in queue4.sh)
cd /work/main
while ! grep -q DONE bench/results/2026-11-28-cpu-s27/queue2.txt; do sleep 5; done
B=bench/results/2026-11-28-cpu-s27
for i in 1 2 3; do
  for v in new old; do
    if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
    PYTHONPATH=$P python scripts/bench_openai_server.py --modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $B/pareto-$v$i > $B/pareto-$v$i.log 2>&1
    echo "pareto $v$i done $(date +%T) rc $?"
  done
done
for t in 128 64; do
  for i in 1 2 3 4; do
    if [ $t = 64 ] && [ $i = 4 ]; then break; fi
    for v in old new; do
      if [ $v = old ]; then P=/tmp/s27old:.; else P=.; fi
      echo "$v TOKENS=$t $(TOKENS=$t PYTHONPATH=$P python bench/results/2026-11-28-cpu-s25/cold_c8.py $i 8 2>&1 | tail -1)"
    done
  done
done
echo DONE3
