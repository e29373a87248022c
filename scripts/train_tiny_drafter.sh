#!/usr/bin/env bash
# Regenerate the fixture drafter for tests/fixtures/gsm8k-tiny/target (fixed seed). Two phases on 2 idle CPU cores:
#   1. self-distillation, ~10 min: the target's greedy continuation of every GSM8K-train prompt, and a second branch
#      per prompt that continues greedily after a short sampled prefix (14,946 sequences);
#   2. training, capped at 20 min: the target's features are computed once (--cache-features, ~1 min), then 8,800
#      steps of the DFlash block loss on a 2-layer drafter (~19 min).
# Writes tests/fixtures/gsm8k-tiny/drafter. Set WORK_DIR to keep the distilled data elsewhere; STEPS/MINUTES to shorten.
set -euo pipefail
cd "$(dirname "$0")/.."
dflash-trt train-drafter \
  --target tests/fixtures/gsm8k-tiny/target \
  --output "${OUTPUT:-tests/fixtures/gsm8k-tiny/drafter}" \
  --work-dir "${WORK_DIR:-out/gsm8k-tiny-drafter.work}" \
  --corpus data/gsm8k_train.jsonl --max-new-tokens 128 --branches 2 \
  --num-layers 2 --target-layer-ids 1,2,3 --block-size 16 --gamma 7 \
  --steps "${STEPS:-8800}" --lr 1e-3 --warmup-steps 50 --batch-size 8 --anchors 8 --cache-features \
  --seed 0 --checkpoint-every 500 --minutes "${MINUTES:-20}" "$@"
