# Twenty-third session, run 2: HEAD (both changes): the standard bench at batch 1 and 8 twice, then the server Pareto
# from the pair and from README's build.
R=bench/results/2026-11-28-cpu-s23
export PYTHONPATH=.
for i in 1 2; do
  python scripts/bench_draft_budget.py --batch-sizes 1,8 --num-prompts 40 --warmup 1 --output $R/bench/run$i > $R/bench-run$i.log 2>&1
done
P="--modes ar,chain:8,auto --concurrency 1,2,4,8,16 --num-prompts 16 --max-tokens 64 --torch-threads 1 --rounds 3 --warmup-rounds 1"
python scripts/bench_openai_server.py $P --output $R/pareto-pair-final > $R/pareto-pair-final.log 2>&1
python scripts/bench_openai_server.py $P --engine-dir out/engines/tiny-gsm8k-cpu --output $R/pareto-dir-final > $R/pareto-dir-final.log 2>&1
echo QUEUE2 DONE
