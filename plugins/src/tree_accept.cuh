// tree_accept.cuh - acceptance of a verified draft tree and the K/V compaction of its accepted path.
//
// tree_accept_kernel = dflash_trt.kernels.tree_accept.tree_accept (one block per row, kTreeThreads threads):
//   1. per node i (a thread each): match[i] = the node is the root (parent < 0) or its token equals the target's token
//      at its parent; parents and matches go to shared memory;
//   2. per node: accepted[i] = match over i and its ancestors, walking the parent chain in shared memory for the
//      2^r nodes the reference's r = bit_length(width - 1) pointer-jumping rounds cover (i and 2^r - 1 ancestors:
//      every ancestor in a tree of depth < width). An accepted node at depth d < width adds its index to sum[d] and
//      1 to count[d] (shared-memory integer atomics: the result does not depend on their order). With distinct sibling
//      tokens there is at most one per depth and sum[d] is that node; otherwise sum[d] is the reference's sum;
//   3. per depth d: a = (depths with count > 0) - 1; path[d] = count[d] ? sum[d] : sum[a] (the reference pads with
//      its unpadded path at index a); the target's token at path[d]; the draft at depth d >= 1 = node_tokens[path[d]]
//      on the path, -1 past it;
//   4. thread 0: accept_row (common.cuh, = sample_accept.accept_tokens) on those tokens and drafts: the stop and
//      budget cuts of a chain step.
//
// compact_kv_kernel = dflash_trt.kernels.tree_accept.compact_kv over a cache [layers, max_slots, capacity, kv_heads,
// head_dim] (k and v; the element's bytes are copied, never converted). Position start + d of slot s gets the vector
// of position start + path[d], for d = 0..width-1, gathered before scattered. Grid (chunks, rows, 2 * layers): block
// (c, i, 2l + kv) owns byte chunk c of every position's vector of row i's slot in layer l of k (kv = 0) or v (kv = 1),
// so blocks touch disjoint bytes (slots distinct). Within a block a write to position start + d can hit a position
// another depth still has to read (path [0, 2, 3, ..]: depth 1 reads start + 2, which depth 2 writes), so the block
// stages every moved source chunk in shared memory, __syncthreads, then writes: no read can see a write of the same
// launch, whatever the order of threads. Depths with path[d] == d are skipped (their position keeps its value under
// gather-then-scatter, since only depth d writes start + d), and so is the padding past the accepted path (path[d] ==
// path[d - 1]: along a root path node indices strictly increase; those positions lie past the committed length); moves whose source or destination lies outside
// 0..capacity-1, and rows whose slot lies outside 0..max_slots-1, are skipped (the reference raises on those).
#pragma once

#include "common.cuh"

namespace dflash {
namespace tree {

constexpr int kTreeThreads = 64;       // one node per thread for the largest tree (spec.tree.MAX_TREE_NODES = 64)
constexpr int kCompactThreads = 256;
constexpr int64_t kStageBytes = 32768;  // shared staging per compact block: width x chunk bytes
constexpr int64_t kMaxNodes = 1024;     // host-side limits: the shared memory of one block (see tree_accept_smem)
constexpr int64_t kMaxWidth = 1024;

// Dynamic shared memory of tree_accept_kernel: sum, tokens, drafts [width] (8 bytes), count [width] (4 bytes),
// parent [num_nodes] (4 bytes), match [num_nodes] (1 byte).
__host__ __device__ inline size_t tree_accept_smem(int64_t num_nodes, int64_t width) {
  return static_cast<size_t>(width) * (3 * 8 + 4) + static_cast<size_t>(num_nodes) * (4 + 1);
}

__global__ void __launch_bounds__(kTreeThreads)
tree_accept_kernel(const int64_t* __restrict__ node_tokens, const int64_t* __restrict__ parents,
                   const int64_t* __restrict__ depth, const int64_t* __restrict__ target_tokens, int64_t num_nodes,
                   const int64_t* __restrict__ stop_ids, int64_t num_stops, const int64_t* __restrict__ remaining,
                   int64_t width, int64_t hops, int64_t* __restrict__ path, int64_t* __restrict__ path_tokens,
                   int64_t* __restrict__ accepted, int64_t* __restrict__ num_emitted, uint8_t* __restrict__ finished) {
  DFLASH_DYNAMIC_SHARED(unsigned long long, smem);
  unsigned long long* sum = smem;                                      // [width]
  int64_t* tokens = reinterpret_cast<int64_t*>(sum + width);           // [width]
  int64_t* drafts = tokens + width;                                    // [width] (width - 1 used)
  unsigned int* count = reinterpret_cast<unsigned int*>(drafts + width);  // [width]
  int* parent = reinterpret_cast<int*>(count + width);                 // [num_nodes]: -1 root, -2 out of range
  uint8_t* match = reinterpret_cast<uint8_t*>(parent + num_nodes);     // [num_nodes]
  const int64_t r = blockIdx.x;
  const int64_t* row_tokens = node_tokens + r * num_nodes;
  const int64_t* row_target = target_tokens + r * num_nodes;

  // 1. matches: node_tokens == target_tokens.gather(1, parents.clamp_min(0)) | (parents < 0)
  for (int64_t d = threadIdx.x; d < width; d += blockDim.x) {
    sum[d] = 0ull;
    count[d] = 0u;
  }
  for (int64_t i = threadIdx.x; i < num_nodes; i += blockDim.x) {
    const int64_t p = parents[r * num_nodes + i];
    parent[i] = p < 0 ? -1 : (p < num_nodes ? static_cast<int>(p) : -2);
    match[i] = (p < 0 || (p < num_nodes && row_tokens[i] == row_target[p])) ? 1 : 0;
  }
  __syncthreads();

  // 2. accepted nodes: i and its first `hops` ancestors all match (the reference's pointer jumping covers 2^r nodes)
  for (int64_t i = threadIdx.x; i < num_nodes; i += blockDim.x) {
    bool ok = true;
    int x = static_cast<int>(i);
    for (int64_t h = 0;; ++h) {
      if (!match[x]) {  // a node whose parent index is out of range never matches
        ok = false;
        break;
      }
      if (h == hops || parent[x] < 0) break;
      x = parent[x];
    }
    const int64_t dep = depth[r * num_nodes + i];
    if (ok && dep >= 0 && dep < width) {
      atomicAdd(&sum[dep], static_cast<unsigned long long>(i));
      atomicAdd(&count[dep], 1u);
    }
  }
  __syncthreads();

  // 3. the path, depth by depth, padded with its last node; the target's tokens and the drafts along it
  int64_t a = -1;  // accepted = on_path.sum() - 1
  for (int64_t d = 0; d < width; ++d) a += count[d] > 0u ? 1 : 0;
  const int64_t pad = a >= 0 ? static_cast<int64_t>(sum[a]) : 0;
  for (int64_t d = threadIdx.x; d < width; d += blockDim.x) {
    const bool on = count[d] > 0u;
    const int64_t node = on ? static_cast<int64_t>(sum[d]) : pad;
    const bool valid = node >= 0 && node < num_nodes;  // only a malformed tree (equal sibling tokens) leaves the range
    const int64_t tok = valid ? row_target[node] : -1;
    path[r * width + d] = node;
    path_tokens[r * width + d] = tok;
    tokens[d] = tok;
    if (d > 0) drafts[d - 1] = on && valid ? row_tokens[node] : -1;
  }
  __syncthreads();

  // 4. the chain rule along the path: matching prefix, stop ids, budget
  if (threadIdx.x != 0) return;
  const Acceptance acc = accept_row(tokens, drafts, width, stop_ids + r * num_stops, num_stops, remaining[r]);
  accepted[r] = acc.accepted;
  num_emitted[r] = acc.emitted;
  finished[r] = acc.finished ? 1 : 0;
}

// V: the copy unit (uint4 / uint2 / uint32_t / uint16_t / uint8_t), dividing vec_bytes, chunk_bytes and the caches'
// alignment. chunk_bytes: a multiple of sizeof(V) with width * chunk_bytes <= kStageBytes.
template <typename V>
__global__ void __launch_bounds__(kCompactThreads)
compact_kv_kernel(char* __restrict__ k, char* __restrict__ v, int64_t max_slots, int64_t capacity, int64_t vec_bytes,
                  const int64_t* __restrict__ slots, const int64_t* __restrict__ starts,
                  const int64_t* __restrict__ path, int64_t width, int64_t chunk_bytes) {
  DFLASH_DYNAMIC_SHARED(uint4, stage_raw);  // one type for every V (an extern __shared__ array cannot change type)
  V* stage = reinterpret_cast<V*>(stage_raw);  // [width][chunk_bytes / sizeof(V)]
  const int64_t i = blockIdx.y, layer = blockIdx.z / 2;
  const int64_t s = slots[i];
  if (s < 0 || s >= max_slots) return;  // the whole block: no thread waits at the barrier below
  const int64_t start = starts[i];
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * chunk_bytes;
  const int64_t rest = vec_bytes - offset;
  // 32-bit indices within the block: width * chunk_bytes <= kStageBytes
  const int units = static_cast<int>((rest < chunk_bytes ? rest : chunk_bytes) / static_cast<int64_t>(sizeof(V)));
  const int stride = static_cast<int>(chunk_bytes / static_cast<int64_t>(sizeof(V)));
  char* cache = blockIdx.z % 2 == 0 ? k : v;
  char* base = cache + ((layer * max_slots + s) * capacity) * vec_bytes + offset;  // position 0, this chunk
  const int64_t* row_path = path + i * width;
  const int total = static_cast<int>(width) * units;
  auto source = [&](int64_t d) -> int64_t {  // the position depth d copies from, or -1: nothing to move
    if (d > 0 && row_path[d] == row_path[d - 1]) return -1;  // padding past the path
    const int64_t src = start + row_path[d], dst = start + d;
    if (src == dst || src < 0 || src >= capacity || dst < 0 || dst >= capacity) return -1;
    return src;
  };
  // gather: every moved source chunk into shared memory
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    const int d = e / units, u = e % units;
    const int64_t src = source(d);
    if (src >= 0) stage[d * stride + u] = *reinterpret_cast<const V*>(base + src * vec_bytes + u * sizeof(V));
  }
  __syncthreads();  // every read of the block is done before any write: gather-then-scatter
  // scatter
  for (int e = threadIdx.x; e < total; e += blockDim.x) {
    const int d = e / units, u = e % units;
    if (source(d) >= 0) *reinterpret_cast<V*>(base + (start + d) * vec_bytes + u * sizeof(V)) = stage[d * stride + u];
  }
}

}  // namespace tree
}  // namespace dflash
