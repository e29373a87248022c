// common.cuh - shared device helpers: dtype loads, order-preserving float keys, argmax packing, block reductions
// and scans, a vectorised walk over a range of a row, and the chain acceptance rule (matching prefix, stop ids,
// budget) that sample-and-accept and tree acceptance both end with.
#pragma once

#include <stdint.h>
#include <string.h>

#ifdef DFLASH_EMULATE  // a CPU build of the same code for tests without a GPU (plugins/emu/cuda_emu.h)
#include "../emu/cuda_emu.h"
#define DFLASH_LAUNCH(kernel, grid, block, smem, stream) ::dflash_emu::launch(kernel, grid, block, smem)
#define DFLASH_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::dflash_emu::tls.dynamic_shared)
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define DFLASH_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#define DFLASH_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

namespace dflash {

constexpr int kWarp = 32;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// Order-preserving map float -> uint32 (a < b  <=>  key(a) < key(b) for non-NaN floats). -0.0 maps like +0.0 (torch
// compares them equal); every NaN maps to the largest key, so NaN wins an argmax as it does in torch.argmax.
__device__ __forceinline__ uint32_t float_key(float x) {
  if (x != x) return 0xFFFFFFFFu;
  if (x == 0.0f) x = 0.0f;
  uint32_t b = __float_as_uint(x);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_float(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}

// argmax candidate packed so that a larger uint64 is the better one: value key high, inverted index low (so among
// equal values the smallest index wins, as torch.argmax's first-occurrence rule). 0 = "no candidate".
__device__ __forceinline__ unsigned long long pack_argmax(float v, int64_t idx) {
  return (static_cast<unsigned long long>(float_key(v)) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(idx));
}
__device__ __forceinline__ int64_t unpack_index(unsigned long long packed) {
  return static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(packed & 0xFFFFFFFFull));
}

// "v beats best" for a thread walking indices in increasing order: strictly greater, NaN beats non-NaN (torch).
__device__ __forceinline__ bool beats(float v, float best) { return v > best || (v != v && best == best); }

template <typename T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    T other = __shfl_xor_sync(0xFFFFFFFFu, v, o);
    v = other > v ? other : v;
  }
  return v;
}
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

// Block-wide max / sum; every thread gets the result. `scratch` holds >= 32 T. Contains __syncthreads.
template <typename T>
__device__ T block_max(T v, T* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = (blockDim.x + kWarp - 1) / kWarp;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = scratch[0];
  for (int w = 1; w < warps; ++w) r = scratch[w] > r ? scratch[w] : r;
  return r;
}
template <typename T>
__device__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = (blockDim.x + kWarp - 1) / kWarp;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = 0;
  for (int w = 0; w < warps; ++w) r += scratch[w];  // fixed order: deterministic
  return r;
}

// Exclusive suffix sum over threads: thread t gets sum of v over threads t+1..blockDim-1. blockDim % 32 == 0.
// `scratch` holds >= 32 T. Contains __syncthreads. Integer T only where determinism matters.
template <typename T>
__device__ T block_suffix_exclusive(T v, T* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  T incl = v;  // inclusive suffix within the warp
#pragma unroll
  for (int o = 1; o < kWarp; o <<= 1) {
    T other = __shfl_down_sync(0xFFFFFFFFu, incl, o);
    if (lane + o < kWarp) incl += other;
  }
  __syncthreads();
  if (lane == 0) scratch[warp] = incl;  // the warp's total
  __syncthreads();
  T above = 0;
  for (int w = warp + 1; w < warps; ++w) above += scratch[w];
  return above + incl - v;
}

// Calls f(index, value_as_float) for every element of row[begin, end) this thread owns, using 16-byte loads for the
// aligned middle. Each thread sees its indices in increasing order.
template <typename T, typename F>
__device__ __forceinline__ void for_each_element(const T* __restrict__ row, int64_t begin, int64_t end, F&& f) {
  constexpr int kVec = 16 / sizeof(T);
  if (end <= begin) return;
  const T* p = row + begin;
  const int64_t count = end - begin;
  int64_t head = static_cast<int64_t>(((16u - (reinterpret_cast<uintptr_t>(p) & 15u)) & 15u) / sizeof(T));
  if ((reinterpret_cast<uintptr_t>(p) % sizeof(T)) != 0) head = count;  // not even element-aligned: all scalar
  if (head > count) head = count;
  for (int64_t i = threadIdx.x; i < head; i += blockDim.x) f(begin + i, to_float(p[i]));
  const int64_t nvec = (count - head) / kVec;
  const uint4* pv = reinterpret_cast<const uint4*>(p + head);
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    const uint4 raw = __ldg(pv + i);
    T e[kVec];
    memcpy(e, &raw, sizeof(raw));  // not a pointer cast: no strict-aliasing games (compiles to register moves)
    const int64_t base = begin + head + i * kVec;
#pragma unroll
    for (int q = 0; q < kVec; ++q) f(base + q, to_float(e[q]));
  }
  const int64_t tail = head + nvec * kVec;
  for (int64_t i = tail + threadIdx.x; i < count; i += blockDim.x) f(begin + i, to_float(p[i]));
}

// The chain acceptance rule of one row (= dflash_trt.kernels.sample_accept.accept_tokens), run by one thread:
// tokens [k] the target's token at each verified slot, drafts [k-1], stops [num_stops] the row's stop ids (the -1
// padding is compared like any id, as the reference does), remaining the row's token budget.
//   accepted = the longest prefix with drafts[j] == tokens[j];  emitted = accepted + 1, cut right after the first
//   stop token among the emitted slots, then at the budget;  finished = a stop token was emitted or emitted >= budget.
struct Acceptance {
  int64_t accepted;
  int64_t emitted;
  bool finished;
};
__device__ __forceinline__ Acceptance accept_row(const int64_t* tokens, const int64_t* drafts, int64_t k,
                                                 const int64_t* stops, int64_t num_stops, int64_t remaining) {
  // accepted = (drafts == tokens[:, :-1]).cumprod(1).sum(1)
  int64_t a = 0;
  while (a < k - 1 && drafts[a] == tokens[a]) ++a;
  int64_t emit = a + 1;
  // first stop token among the emitted slots
  bool hit_stop = false;
  for (int64_t j = 0; j < emit && !hit_stop; ++j) {
    for (int64_t q = 0; q < num_stops; ++q) {
      if (tokens[j] == stops[q]) {
        hit_stop = true;
        emit = j + 1;
        break;
      }
    }
  }
  const bool out_of_budget = emit >= remaining;
  if (remaining < emit) emit = remaining;
  return Acceptance{a, emit, hit_stop || out_of_budget};
}

}  // namespace dflash
