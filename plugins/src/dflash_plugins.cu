// dflash_plugins.cu - the extern "C" entry points of libdflash_plugins.so (see include/dflash_plugins.h).
// Every launch is checked; failures return a dflash_status and leave a message in dflash_last_error().
#include <cstdarg>
#include <cstdio>
#include <string>

#include "../include/dflash_plugins.h"
#include "block_draft.cuh"
#include "bookkeeping.cuh"
#include "common.cuh"
#include "sample_accept.cuh"
#include "tree_accept.cuh"

#ifndef DFLASH_COMPILED_ARCHS
#define DFLASH_COMPILED_ARCHS "unknown"
#endif

namespace {

thread_local std::string g_last_error;

int fail(int status, const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  g_last_error = buf;
  return status;
}

int cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return DFLASH_OK;
  const int status = (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction)
                         ? DFLASH_ERR_NO_KERNEL_IMAGE
                         : DFLASH_ERR_CUDA;
  return fail(status, "%s: %s (%s); this library holds %s", what, cudaGetErrorString(err), cudaGetErrorName(err),
              DFLASH_COMPILED_ARCHS);
}

// check the launch just made
#define DFLASH_CHECK_LAUNCH(what)                                         \
  do {                                                                    \
    int _st = cuda_status(cudaGetLastError(), what);                      \
    if (_st != DFLASH_OK) return _st;                                     \
  } while (0)

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Vocabulary split of the argmax pass: enough blocks to fill the GPU when there are few rows, whole rows when
// there are many; chunks are multiples of 16 elements so aligned rows stay 16-byte aligned per chunk.
void argmax_split(int64_t rows, int64_t vocab, int64_t* splits, int64_t* chunk) {
  const int64_t by_vocab = ceil_div(vocab, 4096);
  const int64_t by_rows = ceil_div(2048, rows > 0 ? rows : 1);
  int64_t s = by_vocab < by_rows ? by_vocab : by_rows;
  if (s < 1) s = 1;
  int64_t c = ceil_div(ceil_div(vocab, s), 16) * 16;
  *chunk = c;
  *splits = ceil_div(vocab, c);
}

bool valid_dtype(int dtype) { return dtype == DFLASH_FLOAT32 || dtype == DFLASH_FLOAT16 || dtype == DFLASH_BFLOAT16; }

int check_logits_args(const char* fn, const void* logits, int dtype, int64_t n, int64_t k, int64_t vocab,
                      int64_t stride_n, int64_t stride_k) {
  if (!valid_dtype(dtype)) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: dtype %d is not float32/float16/bfloat16", fn, dtype);
  if (n < 0 || k < 1) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: n=%lld, k=%lld (need n >= 0, k >= 1)", fn, (long long)n, (long long)k);
  if (vocab < 1 || vocab > 0x7FFFFFFFLL)
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: vocab=%lld out of 1..2^31-1", fn, (long long)vocab);
  if (stride_n < 0 || stride_k < 0) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: negative logits stride", fn);
  if (n > 0 && logits == nullptr) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: logits is NULL", fn);
  return DFLASH_OK;
}

template <typename T>
int launch_sample_accept(const void* logits, int64_t n, int64_t k, int64_t vocab, int64_t stride_n, int64_t stride_k,
                         const int64_t* drafts, const float* temperature, const int64_t* top_k, const float* top_p,
                         const int64_t* keys, const int64_t* positions, const int64_t* stop_ids, int64_t num_stops,
                         const int64_t* remaining, int64_t* target_tokens, int64_t* accepted, int64_t* num_emitted,
                         uint8_t* finished, unsigned long long* best, float* threshold, cudaStream_t stream) {
  using namespace dflash::sa;
  const T* x = static_cast<const T*>(logits);
  const int64_t rows = n * k;
  DFLASH_LAUNCH(prepare_kernel<T>, static_cast<unsigned>(rows), kPrepareThreads, 0, stream)(
      x, stride_n, stride_k, k, vocab, temperature, top_k, top_p, threshold, best);
  DFLASH_CHECK_LAUNCH("dflash_sample_accept: prepare_kernel launch");
  int64_t splits, chunk;
  argmax_split(rows, vocab, &splits, &chunk);
  DFLASH_LAUNCH(argmax_kernel<T>, static_cast<unsigned>(rows * splits), kArgmaxThreads, 0, stream)(
      x, stride_n, stride_k, k, vocab, splits, chunk, temperature, keys, positions, threshold, best);
  DFLASH_CHECK_LAUNCH("dflash_sample_accept: argmax_kernel launch");
  const size_t tokens_smem = static_cast<size_t>(k) * sizeof(int64_t);
  DFLASH_LAUNCH(finalize_kernel, static_cast<unsigned>(n), kFinalizeThreads, tokens_smem, stream)(
      best, k, drafts, stop_ids, num_stops, remaining, target_tokens, accepted, num_emitted, finished);
  DFLASH_CHECK_LAUNCH("dflash_sample_accept: finalize_kernel launch");
  return DFLASH_OK;
}

template <typename T>
int launch_plain_argmax(const void* logits, int64_t n, int64_t k, int64_t vocab, int64_t stride_n, int64_t stride_k,
                        unsigned long long* best, cudaStream_t stream) {
  using namespace dflash::sa;
  const int64_t rows = n * k;
  int64_t splits, chunk;
  argmax_split(rows, vocab, &splits, &chunk);
  DFLASH_LAUNCH(argmax_kernel<T>, static_cast<unsigned>(rows * splits), kArgmaxThreads, 0, stream)(
      static_cast<const T*>(logits), stride_n, stride_k, k, vocab, splits, chunk, nullptr, nullptr, nullptr, nullptr,
      best);
  DFLASH_CHECK_LAUNCH("dflash_drafts_to_verify: argmax_kernel launch");
  return DFLASH_OK;
}

template <typename V>
int launch_compact_kv(void* k, void* v, int64_t layers, int64_t max_slots, int64_t capacity, int64_t vec_bytes,
                      int64_t n, const int64_t* slots, const int64_t* starts, const int64_t* path, int64_t width,
                      cudaStream_t stream) {
  using namespace dflash::tree;
  // Chunks of each position's vector: as wide as the staging buffer allows for `width` depths (a multiple of V).
  int64_t chunk = kStageBytes / width / static_cast<int64_t>(sizeof(V)) * static_cast<int64_t>(sizeof(V));
  if (chunk > vec_bytes) chunk = vec_bytes;
  const int64_t chunks = ceil_div(vec_bytes, chunk);
  if (chunks > 0x7FFFFFFFLL) return fail(DFLASH_ERR_INVALID_ARGUMENT, "dflash_compact_kv: grid too large");
  dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(n), static_cast<unsigned>(2 * layers));
  DFLASH_LAUNCH(compact_kv_kernel<V>, grid, kCompactThreads, static_cast<size_t>(width * chunk), stream)(
      static_cast<char*>(k), static_cast<char*>(v), max_slots, capacity, vec_bytes, slots, starts, path, width, chunk);
  DFLASH_CHECK_LAUNCH("dflash_compact_kv: compact_kv_kernel launch");
  return DFLASH_OK;
}

}  // namespace

extern "C" {

int dflash_abi_version(void) { return DFLASH_ABI_VERSION; }

const char* dflash_compiled_archs(void) { return DFLASH_COMPILED_ARCHS; }

const char* dflash_last_error(void) { return g_last_error.c_str(); }

int dflash_check_device(int device) {
  int previous = 0;
  cudaError_t err = cudaGetDevice(&previous);
  if (err != cudaSuccess) return cuda_status(err, "dflash_check_device: cudaGetDevice");
  err = cudaSetDevice(device);
  if (err != cudaSuccess) return cuda_status(err, "dflash_check_device: cudaSetDevice");
  cudaFuncAttributes attr;
  err = cudaFuncGetAttributes(&attr, dflash::sa::argmax_kernel<__nv_bfloat16>);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, dflash::bk::commit_step_kernel);
  cudaSetDevice(previous);
  if (err != cudaSuccess) return cuda_status(err, "dflash_check_device: no usable kernel image");
  return DFLASH_OK;
}

size_t dflash_sample_accept_workspace_bytes(int64_t n, int64_t k, int64_t vocab) {
  (void)vocab;
  const size_t rows = static_cast<size_t>(n > 0 ? n : 0) * static_cast<size_t>(k > 0 ? k : 0);
  return align_up(rows * sizeof(unsigned long long), 256) + align_up(rows * sizeof(float), 256);
}

int dflash_sample_accept(const void* logits, int dtype, int64_t n, int64_t k, int64_t vocab, int64_t stride_n,
                         int64_t stride_k, const int64_t* drafts, const float* temperature, const int64_t* top_k,
                         const float* top_p, const int64_t* keys, const int64_t* positions, const int64_t* stop_ids,
                         int64_t num_stops, const int64_t* remaining, int64_t* target_tokens, int64_t* accepted,
                         int64_t* num_emitted, uint8_t* finished, void* workspace, size_t workspace_bytes,
                         void* stream) {
  const char* fn = "dflash_sample_accept";
  int st = check_logits_args(fn, logits, dtype, n, k, vocab, stride_n, stride_k);
  if (st != DFLASH_OK) return st;
  if (n == 0) return DFLASH_OK;
  if (n * k > 0x7FFFFFFFLL) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: n*k=%lld rows is too many", fn, (long long)(n * k));
  if (num_stops < 0) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: num_stops=%lld < 0", fn, (long long)num_stops);
  if ((k > 1 && drafts == nullptr) || (num_stops > 0 && stop_ids == nullptr) || !temperature || !top_k || !top_p ||
      !keys || !positions || !remaining || !target_tokens || !accepted || !num_emitted || !finished)
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: a required pointer is NULL", fn);
  const size_t need = dflash_sample_accept_workspace_bytes(n, k, vocab);
  if (workspace == nullptr || workspace_bytes < need)
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: workspace of %zu bytes, need %zu (dflash_sample_accept_workspace_bytes)",
                fn, workspace_bytes, need);
  int64_t splits, chunk;
  argmax_split(n * k, vocab, &splits, &chunk);
  if (n * k * splits > 0x7FFFFFFFLL) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: grid too large", fn);
  auto* best = static_cast<unsigned long long*>(workspace);
  auto* threshold = reinterpret_cast<float*>(static_cast<char*>(workspace) +
                                             align_up(static_cast<size_t>(n * k) * sizeof(unsigned long long), 256));
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DFLASH_FLOAT32:
      return launch_sample_accept<float>(logits, n, k, vocab, stride_n, stride_k, drafts, temperature, top_k, top_p,
                                         keys, positions, stop_ids, num_stops, remaining, target_tokens, accepted,
                                         num_emitted, finished, best, threshold, s);
    case DFLASH_FLOAT16:
      return launch_sample_accept<__half>(logits, n, k, vocab, stride_n, stride_k, drafts, temperature, top_k, top_p,
                                          keys, positions, stop_ids, num_stops, remaining, target_tokens, accepted,
                                          num_emitted, finished, best, threshold, s);
    default:
      return launch_sample_accept<__nv_bfloat16>(logits, n, k, vocab, stride_n, stride_k, drafts, temperature, top_k,
                                                 top_p, keys, positions, stop_ids, num_stops, remaining,
                                                 target_tokens, accepted, num_emitted, finished, best, threshold, s);
  }
}

int dflash_prepare_block(const int64_t* last_tokens, const int64_t* starts, int64_t n, int64_t mask_token_id,
                         int64_t block_size, int64_t* ids, int64_t* positions, void* stream) {
  const char* fn = "dflash_prepare_block";
  if (n < 0 || block_size < 1)
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: n=%lld, block_size=%lld (need n >= 0, block_size >= 1)", fn,
                (long long)n, (long long)block_size);
  if (n == 0) return DFLASH_OK;
  if (!last_tokens || !starts || !ids || !positions) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: a pointer is NULL", fn);
  const int64_t total = n * block_size;
  int64_t blocks = ceil_div(total, dflash::bd::kThreads);
  if (blocks > 65535) blocks = 65535;
  DFLASH_LAUNCH(dflash::bd::prepare_block_kernel, static_cast<unsigned>(blocks), dflash::bd::kThreads, 0,
                static_cast<cudaStream_t>(stream))(last_tokens, starts, n, mask_token_id, block_size, ids, positions);
  DFLASH_CHECK_LAUNCH("dflash_prepare_block: prepare_block_kernel launch");
  return DFLASH_OK;
}

size_t dflash_drafts_to_verify_workspace_bytes(int64_t n, int64_t k, int64_t vocab) {
  (void)vocab;
  const size_t rows = static_cast<size_t>(n > 0 ? n : 0) * static_cast<size_t>(k > 1 ? k - 1 : 0);
  return align_up(rows * sizeof(unsigned long long), 256);
}

int dflash_drafts_to_verify(const int64_t* last_tokens, const void* draft_logits, int dtype, int64_t n, int64_t k,
                            int64_t vocab, int64_t stride_n, int64_t stride_k, const int64_t* starts,
                            int64_t* verify_ids, int64_t* drafts, int64_t* verify_positions, void* workspace,
                            size_t workspace_bytes, void* stream) {
  const char* fn = "dflash_drafts_to_verify";
  int st = check_logits_args(fn, k > 1 ? draft_logits : reinterpret_cast<const void*>(1), dtype, n, k, vocab,
                             stride_n, stride_k);
  if (st != DFLASH_OK) return st;
  if (n == 0) return DFLASH_OK;
  if (!last_tokens || !verify_ids || (k > 1 && !drafts))
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: a required pointer is NULL", fn);
  const int64_t rows = n * (k - 1);
  if (rows > 0x7FFFFFFFLL) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: too many rows", fn);
  const size_t need = dflash_drafts_to_verify_workspace_bytes(n, k, vocab);
  if (need > 0 && (workspace == nullptr || workspace_bytes < need))
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: workspace of %zu bytes, need %zu (dflash_drafts_to_verify_workspace_bytes)",
                fn, workspace_bytes, need);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  auto* best = static_cast<unsigned long long*>(workspace);
  if (rows > 0) {
    int64_t splits, chunk;
    argmax_split(rows, vocab, &splits, &chunk);
    if (rows * splits > 0x7FFFFFFFLL) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: grid too large", fn);
    st = cuda_status(cudaMemsetAsync(best, 0, static_cast<size_t>(rows) * sizeof(unsigned long long), s),
                     "dflash_drafts_to_verify: cudaMemsetAsync");
    if (st != DFLASH_OK) return st;
    switch (dtype) {
      case DFLASH_FLOAT32: st = launch_plain_argmax<float>(draft_logits, n, k - 1, vocab, stride_n, stride_k, best, s); break;
      case DFLASH_FLOAT16: st = launch_plain_argmax<__half>(draft_logits, n, k - 1, vocab, stride_n, stride_k, best, s); break;
      default: st = launch_plain_argmax<__nv_bfloat16>(draft_logits, n, k - 1, vocab, stride_n, stride_k, best, s); break;
    }
    if (st != DFLASH_OK) return st;
  }
  int64_t blocks = ceil_div(n * k, dflash::bd::kThreads);
  if (blocks > 65535) blocks = 65535;
  DFLASH_LAUNCH(dflash::bd::verify_input_kernel, static_cast<unsigned>(blocks), dflash::bd::kThreads, 0, s)(
      best, last_tokens, starts, n, k, verify_ids, drafts, starts != nullptr ? verify_positions : nullptr);
  DFLASH_CHECK_LAUNCH("dflash_drafts_to_verify: verify_input_kernel launch");
  return DFLASH_OK;
}

int dflash_commit_step(int64_t n, int64_t k, const int64_t* accepted, const int64_t* slots, const int64_t* starts,
                       int64_t max_slots, int64_t* target_lengths, const void* features, int64_t feat_dim,
                       int elem_bytes, void* context, int64_t context_k, int64_t* context_counts,
                       int64_t* drafter_lengths, const int64_t* target_tokens, int64_t* last_tokens, void* stream) {
  const char* fn = "dflash_commit_step";
  if (n < 0 || k < 1 || max_slots < 0)
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: n=%lld, k=%lld, max_slots=%lld", fn, (long long)n, (long long)k,
                (long long)max_slots);
  if (n == 0) return DFLASH_OK;
  if (n > 65535 || k > 0x7FFFFFFFLL) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: n=%lld > 65535 rows", fn, (long long)n);
  if (!accepted || !slots || !starts || !target_lengths)
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: a required pointer is NULL", fn);
  const bool drafter = context != nullptr;
  if (drafter && (!features || !context_counts || !drafter_lengths || feat_dim < 0 || context_k < k ||
                  (elem_bytes != 2 && elem_bytes != 4)))
    return fail(DFLASH_ERR_INVALID_ARGUMENT,
                "%s: the drafter group needs features, context, context_counts, drafter_lengths, feat_dim >= 0, "
                "context_k >= k and elem_bytes 2 or 4", fn);
  if (!drafter && (features || context_counts || drafter_lengths))
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: features/context_counts/drafter_lengths given without context", fn);
  if ((target_tokens == nullptr) != (last_tokens == nullptr))
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: target_tokens and last_tokens go together", fn);
  dim3 grid(static_cast<unsigned>(drafter ? k : 1), static_cast<unsigned>(n));
  DFLASH_LAUNCH(dflash::bk::commit_step_kernel, grid, dflash::bk::kThreads, 0, static_cast<cudaStream_t>(stream))(
      k, accepted, slots, starts, max_slots, target_lengths, static_cast<const char*>(features),
      feat_dim * elem_bytes, static_cast<char*>(context), context_k, context_counts, drafter_lengths, target_tokens,
      last_tokens);
  DFLASH_CHECK_LAUNCH("dflash_commit_step: commit_step_kernel launch");
  return DFLASH_OK;
}

int dflash_tree_accept(int64_t n, int64_t num_nodes, const int64_t* node_tokens, const int64_t* parents,
                       const int64_t* depth, const int64_t* target_tokens, const int64_t* stop_ids, int64_t num_stops,
                       const int64_t* remaining, int64_t width, int64_t* path, int64_t* path_tokens, int64_t* accepted,
                       int64_t* num_emitted, uint8_t* finished, void* stream) {
  using namespace dflash::tree;
  const char* fn = "dflash_tree_accept";
  if (n < 0 || num_nodes < 1 || num_nodes > kMaxNodes || width < 1 || width > kMaxWidth || num_stops < 0)
    return fail(DFLASH_ERR_INVALID_ARGUMENT,
                "%s: n=%lld, num_nodes=%lld, width=%lld, num_stops=%lld (need n >= 0, num_nodes in 1..%lld, width "
                "in 1..%lld, num_stops >= 0)", fn, (long long)n, (long long)num_nodes, (long long)width,
                (long long)num_stops, (long long)kMaxNodes, (long long)kMaxWidth);
  if (n == 0) return DFLASH_OK;
  if (n > 0x7FFFFFFFLL) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: n=%lld rows is too many", fn, (long long)n);
  if (!node_tokens || !parents || !depth || !target_tokens || (num_stops > 0 && !stop_ids) || !remaining || !path ||
      !path_tokens || !accepted || !num_emitted || !finished)
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: a required pointer is NULL", fn);
  // r = bit_length(width - 1) pointer-jumping rounds check a node and its first 2^r - 1 ancestors
  int64_t rounds = 0;
  while ((width - 1) >> rounds) ++rounds;
  const int64_t hops = (int64_t{1} << rounds) - 1;
  DFLASH_LAUNCH(tree_accept_kernel, static_cast<unsigned>(n), kTreeThreads, tree_accept_smem(num_nodes, width),
                static_cast<cudaStream_t>(stream))(
      node_tokens, parents, depth, target_tokens, num_nodes, stop_ids, num_stops, remaining, width, hops, path,
      path_tokens, accepted, num_emitted, finished);
  DFLASH_CHECK_LAUNCH("dflash_tree_accept: tree_accept_kernel launch");
  return DFLASH_OK;
}

int dflash_compact_kv(void* k, void* v, int elem_bytes, int64_t layers, int64_t max_slots, int64_t capacity,
                      int64_t kv_heads, int64_t head_dim, int64_t n, const int64_t* slots, const int64_t* starts,
                      const int64_t* path, int64_t width, void* stream) {
  using namespace dflash::tree;
  const char* fn = "dflash_compact_kv";
  if (n < 0 || width < 1 || width > kMaxWidth || layers < 0 || max_slots < 0 || capacity < 0 || kv_heads < 0 ||
      head_dim < 0 || (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8))
    return fail(DFLASH_ERR_INVALID_ARGUMENT,
                "%s: n=%lld, width=%lld, cache [%lld, %lld, %lld, %lld, %lld] of %d-byte elements (need n >= 0, width "
                "in 1..%lld, sizes >= 0, elem_bytes 1, 2, 4 or 8)", fn, (long long)n, (long long)width,
                (long long)layers, (long long)max_slots, (long long)capacity, (long long)kv_heads, (long long)head_dim,
                elem_bytes, (long long)kMaxWidth);
  const int64_t vec_bytes = kv_heads * head_dim * elem_bytes;
  if (n == 0 || layers == 0 || max_slots == 0 || capacity == 0 || vec_bytes == 0) return DFLASH_OK;
  if (n > 65535 || layers > 32767)
    return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: n=%lld rows (<= 65535), layers=%lld (<= 32767)", fn, (long long)n,
                (long long)layers);
  if (!k || !v || !slots || !starts || !path) return fail(DFLASH_ERR_INVALID_ARGUMENT, "%s: a pointer is NULL", fn);
  const uintptr_t align = reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v) |
                          static_cast<uintptr_t>(vec_bytes);
  auto launch = [&](auto unit) {  // the widest copy unit the caches' alignment and the vector size allow
    return launch_compact_kv<decltype(unit)>(k, v, layers, max_slots, capacity, vec_bytes, n, slots, starts, path,
                                             width, static_cast<cudaStream_t>(stream));
  };
  if ((align & 15u) == 0) return launch(uint4{});
  if ((align & 7u) == 0) return launch(uint2{});
  if ((align & 3u) == 0) return launch(uint32_t{});
  if ((align & 1u) == 0) return launch(uint16_t{});
  return launch(uint8_t{});
}

}  // extern "C"
