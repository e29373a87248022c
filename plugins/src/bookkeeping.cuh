// bookkeeping.cuh - end-of-step state updates (= dflash_trt.kernels.bookkeeping.commit_step).
//
// One block per (row i, verified slot j): slot j <= accepted[i] copies features[i, j, :] into
// context[slots[i], j, :] with the widest aligned vector (16/8/4/2 bytes); block (i, 0) thread 0 also updates the
// per-slot scalars. Rows whose slot is out of range are skipped.
#pragma once

#include "common.cuh"

namespace dflash {
namespace bk {

constexpr int kThreads = 256;

template <typename V>
__device__ __forceinline__ void copy_as(const void* src, void* dst, int64_t bytes) {
  const V* s = static_cast<const V*>(src);
  V* d = static_cast<V*>(dst);
  const int64_t count = bytes / static_cast<int64_t>(sizeof(V));
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) d[e] = s[e];
}

__global__ void __launch_bounds__(kThreads)
commit_step_kernel(int64_t k, const int64_t* __restrict__ accepted, const int64_t* __restrict__ slots,
                   const int64_t* __restrict__ starts, int64_t max_slots, int64_t* __restrict__ target_lengths,
                   const char* __restrict__ features, int64_t row_bytes, char* __restrict__ context, int64_t context_k,
                   int64_t* __restrict__ context_counts, int64_t* __restrict__ drafter_lengths,
                   const int64_t* __restrict__ target_tokens, int64_t* __restrict__ last_tokens) {
  const int64_t i = blockIdx.y, j = blockIdx.x;
  const int64_t s = slots[i];
  if (s < 0 || s >= max_slots) return;
  const int64_t a = accepted[i];
  if (j == 0 && threadIdx.x == 0) {
    target_lengths[s] = starts[i] + a + 1;
    if (drafter_lengths != nullptr) drafter_lengths[s] += context_counts[s];
    if (context_counts != nullptr) context_counts[s] = a + 1;
    if (last_tokens != nullptr && a >= 0 && a < k) last_tokens[s] = target_tokens[i * k + a];
  }
  if (context == nullptr || j > a) return;
  const char* src = features + (i * k + j) * row_bytes;
  char* dst = context + (s * context_k + j) * row_bytes;
  const uintptr_t align = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                          static_cast<uintptr_t>(row_bytes);
  if ((align & 15u) == 0) copy_as<uint4>(src, dst, row_bytes);
  else if ((align & 7u) == 0) copy_as<uint2>(src, dst, row_bytes);
  else if ((align & 3u) == 0) copy_as<uint32_t>(src, dst, row_bytes);
  else if ((align & 1u) == 0) copy_as<uint16_t>(src, dst, row_bytes);
  else copy_as<char>(src, dst, row_bytes);
}

}  // namespace bk
}  // namespace dflash
