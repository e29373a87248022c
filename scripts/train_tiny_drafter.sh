#!/usr/bin/env bash
# Regenerate the fixture drafter for tests/fixtures/gsm8k-tiny/target (fixed seed), in steps of at most ~20 minutes on
# 2 idle CPU cores:
#   1. self-distillation, ~10 min: the target's greedy continuation of every GSM8K-train prompt, and a second branch
#      per prompt that continues greedily after a short sampled prefix (14,946 sequences);
#   2. training phase 1, 20 min: the target's features are computed once (--cache-features, ~2 min), then the DFlash
#      block loss on a 2-layer drafter, on a cosine schedule of STEPS steps, until 20 min of training time;
#   3. training phase 2, <= 20 min: --resume (bit-exact: batches depend only on seed and step) until STEPS or 40 min of
#      training time in all.
# Writes tests/fixtures/gsm8k-tiny/drafter. WORK_DIR keeps the distilled data and checkpoints; OUTPUT, STEPS to change.
set -euo pipefail
cd "$(dirname "$0")/.."
train() {
  dflash-trt train-drafter \
    --target tests/fixtures/gsm8k-tiny/target \
    --output "${OUTPUT:-tests/fixtures/gsm8k-tiny/drafter}" \
    --work-dir "${WORK_DIR:-out/gsm8k-tiny-drafter.work}" \
    --corpus data/gsm8k_train.jsonl --max-new-tokens 128 --branches 2 \
    --num-layers 2 --target-layer-ids 1,2,3 --block-size 16 --gamma 7 \
    --steps "${STEPS:-14000}" --lr 1e-3 --warmup-steps 50 --batch-size 8 --anchors 8 --cache-features \
    --seed 0 --checkpoint-every 500 "$@"
}
train --minutes 20                # distillation (cached in WORK_DIR), then training phase 1
train --minutes 40 --resume       # training phase 2: the rest of the schedule
