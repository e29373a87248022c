#!/usr/bin/env bash
# One-shot GPU check: build libdflash_plugins.so, run every test marked `gpu` (the kernels, draft-tree acceptance and
# K/V compaction included; the CUDA-graph decode loop, the default on a GPU, with every draft budget; the FP8 GEMM
# drafter path), run the kernel (draft-tree ops included), step-overhead and FP8-drafter benchmarks, the draft budgets
# side by side on the shipped pair (AR, chains, trees, auto) and `dflash-trt bench` against transformers' generate;
# everything goes to bench/results/<date>-gpu/ (build.log, env.txt, gpu_tests.log + .xml, bench_kernels.txt + .json,
# bench_step.txt, bench_quant_drafter.txt, draft_budget/, bench_e2e.txt + e2e/). Exit status: non-zero if the build,
# a GPU test or a benchmark failed (the benchmarks still run after failed tests).
#
#   scripts/gpu_check.sh [--quick] [--serving]
#     --quick    fewer benchmark sizes and prompts
#     --serving  also the OpenAI-server Pareto on the GPU (AR, chain:16, tree:32, auto at concurrency 1-16, 3 rounds
#                after a warm-up round, as every H200 Pareto since 2026-11-26 was run: auto explores there; needs
#                fastapi, uvicorn and openai: pip install -e ".[serve,test]"), into serving/
#
# Environment: GPU_CHECK_OUT (results directory), GPU_CHECK_TEST_TIMEOUT / GPU_CHECK_BENCH_TIMEOUT (seconds the GPU
# tests / each benchmark may run, default 1800 / 900: a hung GPU ends its phase, not the check).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python}"
OUT="${GPU_CHECK_OUT:-bench/results/$(date +%Y-%m-%d)-gpu}"
mkdir -p "$OUT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # a checkout that is not pip-installed works too
TT="${GPU_CHECK_TEST_TIMEOUT:-1800}"
BT="${GPU_CHECK_BENCH_TIMEOUT:-900}"
BENCH_ARGS=()
PROMPTS=80
BATCHES=1,8,16
SERVING=0
for arg in "$@"; do
  case "$arg" in
    --quick) BENCH_ARGS+=(--quick); PROMPTS=32; BATCHES=1,8 ;;
    --serving) SERVING=1 ;;
    *) echo "gpu_check.sh: unknown argument '$arg' (use --quick, --serving)" >&2; exit 2 ;;
  esac
done

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
timeout "$TT" "$PY" -m pytest -q -m gpu -rs --junitxml="$OUT/gpu_tests.xml" tests 2>&1 | tee "$OUT/gpu_tests.log"
TESTS=${PIPESTATUS[0]}

echo "== kernel benchmark (sample_accept, drafts_to_verify, prepare_block, commit_step, tree_accept, compact_kv)"
timeout "$BT" "$PY" scripts/bench_kernels.py ${BENCH_ARGS[@]+"${BENCH_ARGS[@]}"} --json "$OUT/bench_kernels.json" 2>&1 \
  | tee "$OUT/bench_kernels.txt"
BENCH=${PIPESTATUS[0]}

echo "== spec step overhead (device loop with CUDA graphs, host loop), Qwen3-8B dims, random weights"
{ timeout "$BT" "$PY" scripts/bench_step.py --decode-loop device && timeout "$BT" "$PY" scripts/bench_step.py --decode-loop host; } 2>&1 \
  | tee "$OUT/bench_step.txt"
STEP=${PIPESTATUS[0]}

echo "== FP8 vs bf16 drafter forward, Qwen3-8B drafter dims"
timeout "$BT" "$PY" scripts/bench_quant_drafter.py 2>&1 | tee "$OUT/bench_quant_drafter.txt"
QUANT=${PIPESTATUS[0]}

echo "== draft budgets side by side on the shipped pair (AR, chains, trees, auto; default decode loop), $PROMPTS prompts"
timeout "$BT" "$PY" scripts/bench_draft_budget.py --device cuda --num-prompts "$PROMPTS" --batch-sizes "$BATCHES" \
  --warmup 1 --output "$OUT/draft_budget" 2>&1 | tee "$OUT/bench_draft_budget.txt"
BUDGET=${PIPESTATUS[0]}

echo "== dflash-trt bench vs transformers' generate, shipped pair, batch 1, auto"
timeout "$BT" "$PY" -m dflash_trt bench --target tests/fixtures/gsm8k-tiny/target --drafter tests/fixtures/gsm8k-tiny/drafter \
  --dataset data/prompts/eagle_gsm8k.jsonl --num-prompts "$PROMPTS" --max-new-tokens 128 --draft auto --device cuda \
  --no-progress --output "$OUT/e2e" 2>&1 | tee "$OUT/bench_e2e.txt"
E2E=${PIPESTATUS[0]}

SERVE=0
if [ "$SERVING" = 1 ]; then
  echo "== OpenAI server on the GPU: AR, chain:16, tree:32, auto at concurrency 1-16 (shipped pair)"
  if "$PY" -c "import fastapi, uvicorn, openai" 2>/dev/null; then
    timeout "$BT" "$PY" scripts/bench_openai_server.py --device cuda --modes ar,chain:16,tree:32,auto \
      --concurrency 1,2,4,8,16 --rounds 3 --warmup-rounds 1 --num-prompts 16 --max-tokens 64 --output "$OUT/serving" 2>&1 \
      | tee "$OUT/bench_serving.txt"
    SERVE=${PIPESTATUS[0]}
  else
    echo "gpu_check.sh: --serving needs fastapi, uvicorn and openai (pip install -e '.[serve,test]')" >&2
    SERVE=1
  fi
fi

echo "results in $OUT (tests exit $TESTS, benchmarks exit $BENCH $STEP $QUANT $BUDGET $E2E $SERVE)"
[ "$TESTS" = 0 ] && [ "$BENCH" = 0 ] && [ "$STEP" = 0 ] && [ "$QUANT" = 0 ] && [ "$BUDGET" = 0 ] && [ "$E2E" = 0 ] \
  && [ "$SERVE" = 0 ]
