#!/bin/bash
# alternating A/B bench runs at batch 1 (chain:8, tree:16, auto): pairs_b1.sh N OUT, frozen trees in /tmp/s16/A (before)
# and /tmp/s16/B (after): git ls-files -z | xargs -0 -I{} cp --parents {} DIR/
for i in $(seq 1 $1); do
  for t in A B; do
    r=$(cd /tmp/s16/$t && PYTHONPATH=/tmp/s16/$t timeout 900 python scripts/bench_draft_budget.py --batch-sizes ${BS:-1} --num-prompts 40 --warmup 1 --modes chain:8,tree:16,auto 2>&1 | grep -E "auto / best" | sed -E "s/.*\(([a-z0-9:]+)\): ([0-9.]+); auto chose (.*)/\1 \2 \3/")
    echo "pair $i $t $r" | tee -a $2
  done
done
