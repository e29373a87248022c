# the standard bench at batch 8 (chain:4, chain:8, auto; 40 prompts x 128 tokens, one warm-up batch): the working tree
# (the drafter's curve by part of an answer) against HEAD (/tmp/s26old), ABBA x 2
cd /work/main
B=bench/results/2026-11-28-cpu-s26
for x in new:1 old:1 old:2 new:2 new:3 old:3 old:4 new:4; do
  v=${x%:*}; r=${x#*:}
  if [ $v = old ]; then P=/tmp/s26old:.; else P=.; fi
  PYTHONPATH=$P python scripts/bench_draft_budget.py --batch-sizes 8 --modes chain:4,chain:8,auto --num-prompts 40 --warmup 1 --output $B/parts-b8-$v-$r > $B/parts-b8-$v-$r.log 2>&1
  echo "== $v $r $(grep '^| 8 |' $B/parts-b8-$v-$r/README.md | awk -F'|' '{printf "%s %s τ%s; ", $3, $5, $6}')"
done
