# the OpenAI server Pareto (pair), alternating the working tree (prior 0.8) and HEAD's dflash_trt (prior 0.7), 3 each
cd /work/main
B=bench/results/2026-11-28-cpu-s25
for i in 2 3 4; do
  for v in new old; do
    if [ $v = old ]; then P=/tmp/s25old:.; else P=.; fi
    PYTHONPATH=$P python scripts/bench_openai_server.py --modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1 --output $B/pareto-$v$i > $B/pareto-$v$i.log 2>&1
    echo "$v$i done $(date +%T) rc $?"
  done
done
