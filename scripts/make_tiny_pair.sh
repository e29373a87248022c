#!/usr/bin/env bash
# Make the tiny random target + DFlash drafter pair used by the demo (same as `dflash-trt make-tiny-pair`).
set -euo pipefail
out="${1:-out/tiny}"
dflash-trt make-tiny-pair --output "$out" --family "${FAMILY:-qwen3}" --seed "${SEED:-0}"
