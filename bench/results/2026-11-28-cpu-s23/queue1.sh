# Twenty-third session, run 1: the c = 4 -> c = 1 scenario with and without optimism, then the server Pareto (pair and
# README's build) at HEAD-with-optimism (new) and at 156c688 (old, a worktree in /tmp/old156), alternating.
R=bench/results/2026-11-28-cpu-s23
for i in 1 2; do
  PYTHONPATH=. python $R/why_ar.py 4 2; OPT=0 PYTHONPATH=. python $R/why_ar.py 4 2
done > $R/why_ar_c4.txt 2>&1
P="--modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1"
for i in 1 2; do
  python scripts/bench_openai_server.py $P --output $R/pareto-pair-new$i > $R/pareto-pair-new$i.log 2>&1
  (cd /tmp/old156 && PYTHONPATH=/tmp/old156 python scripts/bench_openai_server.py $P --output /work/main/$R/pareto-pair-old$i > /work/main/$R/pareto-pair-old$i.log 2>&1)
done
python scripts/bench_openai_server.py $P --engine-dir out/engines/tiny-gsm8k-cpu --output $R/pareto-dir-new1 > $R/pareto-dir-new1.log 2>&1
(cd /tmp/old156 && PYTHONPATH=/tmp/old156 python scripts/bench_openai_server.py $P --engine-dir /work/main/out/engines/tiny-gsm8k-cpu --output /work/main/$R/pareto-dir-old1 > /work/main/$R/pareto-dir-old1.log 2>&1)
echo QUEUE1 DONE
