// block_draft.cuh - the drafter's block input and the target's verify input.
//
// prepare_block_kernel  = dflash_trt.kernels.block_draft.prepare_block:
//     ids [n, B] = [last token, MASK x (B-1)], positions [n, B] = starts + 0..B-1.
// verify_input_kernel   = dflash_trt.kernels.block_draft.drafts_to_verify_input plus the verify positions:
//     drafts [n, k-1] = argmax of the drafter's logits for block slots 1..k-1 (sa::argmax_kernel in plain-argmax
//     mode folds each row into a packed slot first), verify ids [n, k] = [last, drafts],
//     verify positions [n, k] = starts + 0..k-1.
#pragma once

#include "common.cuh"

namespace dflash {
namespace bd {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
prepare_block_kernel(const int64_t* __restrict__ last_tokens, const int64_t* __restrict__ starts, int64_t n,
                     int64_t mask_token_id, int64_t block_size, int64_t* __restrict__ ids,
                     int64_t* __restrict__ positions) {
  const int64_t total = n * block_size;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / block_size, b = e % block_size;
    ids[e] = b == 0 ? last_tokens[i] : mask_token_id;
    positions[e] = starts[i] + b;
  }
}

// best: [n, k-1] packed argmax slots (unused when k == 1).
__global__ void __launch_bounds__(kThreads)
verify_input_kernel(const unsigned long long* __restrict__ best, const int64_t* __restrict__ last_tokens,
                    const int64_t* __restrict__ starts, int64_t n, int64_t k, int64_t* __restrict__ verify_ids,
                    int64_t* __restrict__ drafts, int64_t* __restrict__ verify_positions) {
  const int64_t total = n * k;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / k, j = e % k;
    int64_t tok;
    if (j == 0) {
      tok = last_tokens[i];
    } else {
      tok = unpack_index(best[i * (k - 1) + (j - 1)]);
      drafts[i * (k - 1) + (j - 1)] = tok;
    }
    verify_ids[e] = tok;
    if (verify_positions != nullptr) verify_positions[e] = starts[i] + j;
  }
}

}  // namespace bd
}  // namespace dflash
