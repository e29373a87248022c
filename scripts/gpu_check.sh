#!/usr/bin/env bash
# One-shot GPU check: build libdflash_plugins.so, run every test marked `gpu` (the kernels, draft-tree acceptance and
# K/V compaction included; the CUDA-graph decode loop; the FP8 GEMM drafter path), run the kernel (draft-tree ops
# included), step-overhead and FP8-drafter benchmarks; everything goes to
# bench/results/<date>/ (build.log, env.txt, gpu_tests.log + .xml, bench_kernels.txt + .json, bench_step.txt,
# bench_quant_drafter.txt). Exit status: non-zero if the build, a GPU test or a benchmark failed (the benchmarks still
# run after failed tests).
#
#   scripts/gpu_check.sh [--quick]        # --quick: fewer benchmark sizes
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python}"
OUT="bench/results/$(date +%Y-%m-%d)"
mkdir -p "$OUT"
BENCH_ARGS=()
[ "${1:-}" = "--quick" ] && BENCH_ARGS+=(--quick)

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check.sh: torch sees no CUDA device (torch.cuda.is_available() is False); install a CUDA build of torch" >&2
  exit 2
fi
{
  date
  nvidia-smi 2>&1 || true
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(), 'sm_%d%d' % torch.cuda.get_device_capability())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

echo "== build" | tee "$OUT/build.log"
if ! scripts/build_plugins.sh 2>&1 | tee -a "$OUT/build.log"; then
  echo "gpu_check.sh: build failed, see $OUT/build.log" >&2
  exit 1
fi

echo "== GPU tests"
"$PY" -m pytest -q -m gpu -rs --junitxml="$OUT/gpu_tests.xml" tests 2>&1 | tee "$OUT/gpu_tests.log"
TESTS=${PIPESTATUS[0]}

echo "== kernel benchmark (sample_accept, drafts_to_verify, prepare_block, commit_step, tree_accept, compact_kv)"
"$PY" scripts/bench_kernels.py ${BENCH_ARGS[@]+"${BENCH_ARGS[@]}"} --json "$OUT/bench_kernels.json" 2>&1 \
  | tee "$OUT/bench_kernels.txt"
BENCH=${PIPESTATUS[0]}

echo "== spec step overhead (device loop with CUDA graphs, host loop), Qwen3-8B dims, random weights"
{ "$PY" scripts/bench_step.py --decode-loop device && "$PY" scripts/bench_step.py --decode-loop host; } 2>&1 \
  | tee "$OUT/bench_step.txt"
STEP=${PIPESTATUS[0]}

echo "== FP8 vs bf16 drafter forward, Qwen3-8B drafter dims"
"$PY" scripts/bench_quant_drafter.py 2>&1 | tee "$OUT/bench_quant_drafter.txt"
QUANT=${PIPESTATUS[0]}

echo "results in $OUT (tests exit $TESTS, benchmarks exit $BENCH $STEP $QUANT)"
[ "$TESTS" = 0 ] && [ "$BENCH" = 0 ] && [ "$STEP" = 0 ] && [ "$QUANT" = 0 ]
