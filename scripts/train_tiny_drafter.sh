#!/usr/bin/env bash
# Regenerate the fixture drafter for tests/fixtures/gsm8k-tiny/target (fixed seed; ~4 min of self-distillation +
# ~15 min of training on 2 idle CPU cores).
# Self-distillation on GSM8K-train prompts, then the DFlash block loss. Writes tests/fixtures/gsm8k-tiny/drafter.
set -euo pipefail
cd "$(dirname "$0")/.."
dflash-trt train-drafter \
  --target tests/fixtures/gsm8k-tiny/target \
  --output tests/fixtures/gsm8k-tiny/drafter \
  --work-dir "${WORK_DIR:-out/gsm8k-tiny-drafter.work}" \
  --corpus data/gsm8k_train.jsonl --num-prompts 6000 --max-new-tokens 128 \
  --num-layers 1 --target-layer-ids 1,2,3 --block-size 16 --gamma 7 \
  --steps "${STEPS:-5000}" --lr 1e-3 --warmup-steps 50 --batch-size 8 --anchors 8 \
  --seed 0 --checkpoint-every 500 --minutes "${MINUTES:-20}" "$@"
