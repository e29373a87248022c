// sample_accept.cuh - the target's token per verified slot (argmax, or Gumbel-max over temperature / top-k / top-p
// filtered scores with counter-based noise) and the acceptance of the drafts.
//
// Reproduces dflash_trt.kernels.sample_accept.sample_accept + dflash_trt.spec.sampling.target_tokens:
//   greedy (T == 0): argmax of the raw logits, first index on ties, NaN wins (torch.argmax);
//   sampled (T > 0): argmax of filtered_scores(...) + gumbel_noise(...), with the same uint32 hash, the same float32
//   operations in the same order (x / max(T, 1e-6), ((h >> 9) + 0.5) * 2^-23, -log(-log(u)), score + noise) and the
//   same -inf masking. u is strictly inside (0, 1), so the noise is always finite.
//
// Three launches, no host synchronisation, no softmax tensor:
//   1. prepare  (one block per row of N*K): resets the row's argmax slot; for rows with top-k / top-p active, finds
//      the keep-threshold (keep score s iff s >= threshold) by radix selection over the row in shared memory:
//      top-k: three passes (11 + 11 + 10 bits of the order-preserving key) of count histograms find the k-th
//             largest score exactly (ties at the cut kept, like `scores < kth -> -inf`);
//      top-p: with m = max score, weights w = exp(s - m) of the top-k-kept entries summed in 2^-44 fixed point (so
//             the result is deterministic regardless of atomic order), three more radix passes of (count, mass)
//             histograms find the smallest kept score t with mass(s > t) < top_p * Z: exactly the reference's
//             "exclusive cumsum of sorted probs < top_p" keep rule, ties at the threshold kept.
//      Rows with no filtering cost nothing; a filtered row costs 3 (top-k), 4 (top-p) or 6 (both) reads of the row.
//   2. argmax   (grid = rows x splits of the vocabulary): one read of the logits; each block folds its chunk into
//      a packed (value, index) uint64 and atomicMax-es it into the row's slot. Entries whose score + max possible
//      finite noise (< 16) cannot beat the thread's best skip the two logs (exact: it cannot win).
//   3. finalize (one block per sequence): tokens, then accept_row (common.cuh): accepted prefix, stop tokens, budget.
#pragma once

#include <math.h>

#include "common.cuh"

namespace dflash {
namespace sa {

constexpr int kPrepareThreads = 512;
constexpr int kArgmaxThreads = 256;
constexpr int kFinalizeThreads = 128;
constexpr int kBins = 2048;               // 11-bit radix digits
constexpr float kFixedScale = 17592186044416.0f;  // 2^44: mass fixed point (sum <= 2^18 * 2^44 < 2^64)
constexpr float kNoiseBound = 17.5f;      // > largest Gumbel noise (u <= 1 - 2^-24: -log(-log(u)) ~= 16.64)

// ---- counter-based noise: bit-identical to dflash_trt.spec.sampling (uint32 arithmetic) ------------------------
__device__ __forceinline__ uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x;
}
// row = _mix32(keys ^ _mix32(positions * 0x27D4EB2D + 0x165667B1))
__device__ __forceinline__ uint32_t row_hash(int64_t key, int64_t position) {
  return mix32(static_cast<uint32_t>(key) ^ mix32(static_cast<uint32_t>(position) * 0x27D4EB2Du + 0x165667B1u));
}
// h = _mix32(_mix32(row + col) ^ (row * 0x61C88647))
__device__ __forceinline__ uint32_t col_hash(uint32_t row, int64_t col) {
  return mix32(mix32(row + static_cast<uint32_t>(col)) ^ (row * 0x61C88647u));
}
// -log(-log(u)), u = ((h >> 9) + 0.5) * 2^-23 in float32, round-to-nearest at every step like torch.
__device__ __forceinline__ float gumbel_from_hash(uint32_t h) {
  // 23-bit uniform strictly inside (0, 1): with 24 bits, (2^24 - 1 + 0.5) * 2^-24 rounds to 1.0f and the noise is +inf.
  const float u = __fmul_rn(__fadd_rn(static_cast<float>(h >> 9), 0.5f), 1.1920928955078125e-07f);
  return -logf(-logf(u));
}
// scores = logits.float() / temperature.clamp_min(1e-6)
__device__ __forceinline__ float clamp_temperature(float t) { return fmaxf(t, 1e-6f); }

// ---- 1. prepare: per-row keep threshold ---------------------------------------------------------------------------
struct PrepareShared {
  unsigned int count[kBins];
  unsigned long long mass[kBins];
  unsigned long long scratch64[32];
  float scratchf[32];
  int found_bin;
  unsigned long long found_above;
};

template <typename T>
__global__ void __launch_bounds__(kPrepareThreads)
prepare_kernel(const T* __restrict__ logits, int64_t stride_n, int64_t stride_k, int64_t k, int64_t vocab,
               const float* __restrict__ temperature, const int64_t* __restrict__ top_k,
               const float* __restrict__ top_p, float* __restrict__ threshold, unsigned long long* __restrict__ best) {
  __shared__ PrepareShared sh;
  const int64_t r = blockIdx.x, n = r / k, j = r % k;
  if (threadIdx.x == 0) best[r] = 0ull;
  const float t = temperature[n];
  const int64_t kk = top_k[n];
  const float p = top_p[n];
  const bool do_k = t > 0.0f && kk > 0 && kk < vocab;
  const bool do_p = t > 0.0f && p < 1.0f;
  if (!do_k && !do_p) {
    if (threadIdx.x == 0) threshold[r] = -INFINITY;
    return;
  }
  const T* row = logits + n * stride_n + j * stride_k;
  const float tc = clamp_temperature(t);
  const int bins_per_thread = kBins / blockDim.x;  // 4 with 512 threads

  float thr = -INFINITY;
  float m = -INFINITY;
  if (do_k) {
    uint32_t prefix = 0, prefmask = 0;
    unsigned long long need = static_cast<unsigned long long>(kk);  // rank (1-based, from the top) still to find
    for (int pass = 0; pass < 3; ++pass) {
      const int shift = pass == 0 ? 21 : (pass == 1 ? 10 : 0);  // digits of 11, 11, 10 bits
      const uint32_t digit = pass == 2 ? 0x3FFu : 0x7FFu;
      for (int b = threadIdx.x; b < kBins; b += blockDim.x) sh.count[b] = 0;
      __syncthreads();
      for_each_element(row, 0, vocab, [&](int64_t, float x) {
        const float s = __fdiv_rn(x, tc);
        const uint32_t key = float_key(s);
        if ((key & prefmask) == prefix) atomicAdd(&sh.count[(key >> shift) & digit], 1u);
        if (pass == 0) m = fmaxf(m, s);
      });
      __syncthreads();
      // bins owned by this thread: b0 .. b0 + bins_per_thread - 1; counts above them come from a suffix scan.
      const int b0 = threadIdx.x * bins_per_thread;
      unsigned long long local = 0;
      for (int q = 0; q < bins_per_thread; ++q) local += sh.count[b0 + q];
      unsigned long long above = block_suffix_exclusive(local, sh.scratch64);
      for (int q = bins_per_thread - 1; q >= 0; --q) {
        const unsigned long long c = sh.count[b0 + q];
        if (above < need && need <= above + c) {
          sh.found_bin = b0 + q;
          sh.found_above = above;
        }
        above += c;
      }
      __syncthreads();
      need -= sh.found_above;
      prefix |= static_cast<uint32_t>(sh.found_bin) << shift;
      prefmask |= digit << shift;
      __syncthreads();
    }
    thr = key_float(prefix);
    m = block_max(m, sh.scratchf);
  } else {
    for_each_element(row, 0, vocab, [&](int64_t, float x) { m = fmaxf(m, __fdiv_rn(x, tc)); });
    m = block_max(m, sh.scratchf);
  }

  if (do_p) {
    uint32_t prefix = 0, prefmask = 0;
    unsigned long long above_prefix = 0;  // fixed-point mass of kept entries strictly above the current prefix
    double target = 0.0;                 // top_p * Z
    bool ok = true;
    for (int pass = 0; pass < 3 && ok; ++pass) {
      const int shift = pass == 0 ? 21 : (pass == 1 ? 10 : 0);  // digits of 11, 11, 10 bits
      const uint32_t digit = pass == 2 ? 0x3FFu : 0x7FFu;
      for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
        sh.count[b] = 0;
        sh.mass[b] = 0ull;
      }
      if (threadIdx.x == 0) sh.found_bin = kBins;
      __syncthreads();
      for_each_element(row, 0, vocab, [&](int64_t, float x) {
        const float s = __fdiv_rn(x, tc);
        if (s >= thr) {
          const uint32_t key = float_key(s);
          if ((key & prefmask) == prefix) {
            const uint32_t b = (key >> shift) & digit;
            atomicAdd(&sh.count[b], 1u);
            const unsigned long long w = __float2ull_rn(expf(s - m) * kFixedScale);
            if (w) atomicAdd(&sh.mass[b], w);
          }
        }
      });
      __syncthreads();
      const int b0 = threadIdx.x * bins_per_thread;
      unsigned long long local = 0;
      for (int q = 0; q < bins_per_thread; ++q) local += sh.mass[b0 + q];
      if (pass == 0) target = static_cast<double>(p) * static_cast<double>(block_sum(local, sh.scratch64));
      const unsigned long long above_start = above_prefix + block_suffix_exclusive(local, sh.scratch64);
      // The lowest non-empty bin whose mass strictly above it is < top_p * Z holds the threshold.
      int mine = kBins;
      unsigned long long above = above_start;
      for (int q = bins_per_thread - 1; q >= 0; --q) {
        if (sh.count[b0 + q] > 0 && static_cast<double>(above) < target) mine = b0 + q;
        above += sh.mass[b0 + q];
      }
      if (mine < kBins) atomicMin(&sh.found_bin, mine);
      __syncthreads();
      int chosen = sh.found_bin;
      if (chosen == kBins) {  // only when top_p <= 0 (or NaN): keep the top value(s)
        __syncthreads();
        if (threadIdx.x == 0) sh.found_bin = -1;
        __syncthreads();
        for (int q = 0; q < bins_per_thread; ++q)
          if (sh.count[b0 + q] > 0) atomicMax(&sh.found_bin, b0 + q);
        __syncthreads();
        chosen = sh.found_bin;
      }
      if (chosen < 0) {  // nothing kept (all scores NaN): leave the top-k threshold
        ok = false;
        break;
      }
      if (chosen >= b0 && chosen < b0 + bins_per_thread) {
        above = above_start;
        for (int q = bins_per_thread - 1; b0 + q > chosen; --q) above += sh.mass[b0 + q];
        sh.found_above = above;
      }
      __syncthreads();
      above_prefix = sh.found_above;
      prefix |= static_cast<uint32_t>(chosen) << shift;
      prefmask |= digit << shift;
      __syncthreads();
    }
    if (ok) thr = key_float(prefix);
  }
  if (threadIdx.x == 0) threshold[r] = thr;
}

// ---- 2. argmax over a chunk of a row, folded into the row's packed slot ------------------------------------------
// rows = n * k; block b handles row b / splits, vocabulary chunk (b % splits) * chunk .. + chunk.
// temperature == nullptr: plain argmax (the drafter's drafts). Otherwise rows with T > 0 take the Gumbel-max sample
// over scores s = x / max(T, 1e-6), entries with s < threshold[row] masked to -inf.
template <typename T>
__global__ void __launch_bounds__(kArgmaxThreads)
argmax_kernel(const T* __restrict__ logits, int64_t stride_n, int64_t stride_k, int64_t k, int64_t vocab,
              int64_t splits, int64_t chunk, const float* __restrict__ temperature, const int64_t* __restrict__ keys,
              const int64_t* __restrict__ positions, const float* __restrict__ threshold,
              unsigned long long* __restrict__ best) {
  __shared__ unsigned long long scratch[32];
  const int64_t r = blockIdx.x / splits, part = blockIdx.x % splits;
  const int64_t n = r / k, j = r % k;
  const int64_t begin = part * chunk;
  const int64_t end = begin + chunk < vocab ? begin + chunk : vocab;
  const T* row = logits + n * stride_n + j * stride_k;
  const float t = temperature != nullptr ? temperature[n] : 0.0f;
  float best_v = -INFINITY;
  int64_t best_i = -1;
  if (!(t > 0.0f)) {
    for_each_element(row, begin, end, [&](int64_t idx, float x) {
      if (best_i < 0 || beats(x, best_v)) {
        best_v = x;
        best_i = idx;
      }
    });
  } else {
    const float tc = clamp_temperature(t);
    const float thr = threshold[r];
    const uint32_t rh = row_hash(keys[n], positions[r]);
    for_each_element(row, begin, end, [&](int64_t idx, float x) {
      const float s = __fdiv_rn(x, tc);
      const bool masked = s < thr;  // masked_fill(scores < kth, -inf); NaN scores are kept, like the reference
      const uint32_t h = col_hash(rh, idx);
      float v;
      if (masked) {
        v = -INFINITY;
      } else {
        if (best_i >= 0 && s + kNoiseBound < best_v) return;  // cannot win: skip the two logs
        v = __fadd_rn(s, gumbel_from_hash(h));
      }
      if (best_i < 0 || beats(v, best_v)) {
        best_v = v;
        best_i = idx;
      }
    });
  }
  unsigned long long packed = best_i >= 0 ? pack_argmax(best_v, best_i) : 0ull;
  packed = block_max(packed, scratch);
  if (threadIdx.x == 0 && packed != 0ull) atomicMax(best + r, packed);
}

// ---- 3. finalize: tokens, accepted prefix, stop tokens, budget (one block per sequence) -------------------------
__global__ void __launch_bounds__(kFinalizeThreads)
finalize_kernel(const unsigned long long* __restrict__ best, int64_t k, const int64_t* __restrict__ drafts,
                const int64_t* __restrict__ stop_ids, int64_t num_stops, const int64_t* __restrict__ remaining,
                int64_t* __restrict__ target_tokens, int64_t* __restrict__ accepted, int64_t* __restrict__ num_emitted,
                uint8_t* __restrict__ finished) {
  DFLASH_DYNAMIC_SHARED(int64_t, tokens);  // [k]
  const int64_t n = blockIdx.x;
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
    const int64_t tok = unpack_index(best[n * k + j]);
    tokens[j] = tok;
    target_tokens[n * k + j] = tok;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const Acceptance acc = accept_row(tokens, drafts + n * (k - 1), k, stop_ids + n * num_stops, num_stops, remaining[n]);
  accepted[n] = acc.accepted;
  num_emitted[n] = acc.emitted;
  finished[n] = acc.finished ? 1 : 0;
}

}  // namespace sa
}  // namespace dflash
