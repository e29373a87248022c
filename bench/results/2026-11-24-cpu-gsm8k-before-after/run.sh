D=tests/fixtures/gsm8k-tiny
for r in 1 2; do
 echo "== before (e70989a) round $r"
 (cd /tmp/before && OMP_NUM_THREADS=1 python -m dflash_trt bench --target $D/target --drafter $D/drafter --dataset data/prompts/eagle_gsm8k.jsonl --num-prompts 24 --max-new-tokens 128 --batch-size 1 --device cpu --no-progress --output OUT/before$r 2>&1 | grep -A3 "^dataset\|overall " | head -8)
 echo "== after round $r"
 (cd /work/main && OMP_NUM_THREADS=1 python -m dflash_trt bench --target $D/target --drafter $D/drafter --dataset data/prompts/eagle_gsm8k.jsonl --num-prompts 24 --max-new-tokens 128 --batch-size 1 --device cpu --no-progress --output OUT/after$r 2>&1 | tail -8)
done
