/*
 * dflash_plugins.h - C ABI of libdflash_plugins.so: CUDA kernels of the DFlash speculative step.
 *
 * Every entry point is `extern "C"`, takes raw device pointers plus the CUDA stream to launch on (a cudaStream_t
 * passed as void*, NULL = the legacy default stream), launches asynchronously and returns a dflash_status. A
 * non-zero status leaves a one-line message for the calling thread in dflash_last_error(). No entry point allocates
 * device memory or synchronises: the ops that need scratch space take a caller-allocated workspace whose size the
 * matching *_workspace_bytes function gives. Each op reproduces a torch reference in dflash_trt/kernels/ (see
 * plugins/README.md for the exact correspondence).
 *
 * Conventions: tensors are contiguous row-major unless a stride argument says otherwise (strides are in elements;
 * the vocabulary dimension of logits is always contiguous); integer tensors are int64 (torch.long); bool outputs are
 * one byte per element (torch.bool).
 */
#ifndef DFLASH_PLUGINS_H
#define DFLASH_PLUGINS_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define DFLASH_API __attribute__((visibility("default")))
#else
#define DFLASH_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change of a signature or semantics below; dflash_trt/kernels/cuda.py refuses a mismatch. */
#define DFLASH_ABI_VERSION 2

typedef enum {
  DFLASH_OK = 0,
  DFLASH_ERR_INVALID_ARGUMENT = 1, /* a size, pointer, dtype or workspace is wrong (nothing was launched) */
  DFLASH_ERR_CUDA = 2,             /* a CUDA call or kernel launch failed (message has cudaGetErrorString) */
  DFLASH_ERR_NO_KERNEL_IMAGE = 3,  /* this library has no cubin/PTX usable by the device */
} dflash_status;

typedef enum {
  DFLASH_FLOAT32 = 0,
  DFLASH_FLOAT16 = 1,
  DFLASH_BFLOAT16 = 2,
} dflash_dtype;

/* ---- library information (no CUDA device or driver needed) ---------------------------------------------------- */

DFLASH_API int dflash_abi_version(void);
/* Comma-separated code the library embeds, e.g. "sm_90,sm_100,sm_103,compute_103" (cubins, then PTX). */
DFLASH_API const char* dflash_compiled_archs(void);
/* Message of the last failing call on this thread ("" if none). Valid until the next call on this thread. */
DFLASH_API const char* dflash_last_error(void);
/* DFLASH_OK if the kernels can run on `device` (queries the CUDA runtime: needs a driver). */
DFLASH_API int dflash_check_device(int device);

/* ---- sample-and-accept (= dflash_trt.kernels.sample_accept.sample_accept) --------------------------------------
 * logits [n, k, vocab] (dtype; element (i, j, v) at i*stride_n + j*stride_k + v); drafts [n, k-1] (may be NULL
 * when k == 1); temperature [n] float32 (0 = greedy); top_k [n] (<= 0 or >= vocab = off); top_p [n] float32
 * (>= 1 = off); keys [n] (32-bit Gumbel keys from seed_keys, low 32 bits used); positions [n, k]; stop_ids
 * [n, num_stops] padded with -1 (may be NULL when num_stops == 0); remaining [n].
 * Outputs: target_tokens [n, k], accepted [n], num_emitted [n], finished [n] (bool bytes). */
DFLASH_API size_t dflash_sample_accept_workspace_bytes(int64_t n, int64_t k, int64_t vocab);
DFLASH_API int dflash_sample_accept(
    const void* logits, int dtype, int64_t n, int64_t k, int64_t vocab, int64_t stride_n, int64_t stride_k,
    const int64_t* drafts, const float* temperature, const int64_t* top_k, const float* top_p, const int64_t* keys,
    const int64_t* positions, const int64_t* stop_ids, int64_t num_stops, const int64_t* remaining,
    int64_t* target_tokens, int64_t* accepted, int64_t* num_emitted, uint8_t* finished,
    void* workspace, size_t workspace_bytes, void* stream);

/* ---- block drafting (= dflash_trt.kernels.block_draft) ---------------------------------------------------------
 * prepare_block: last_tokens [n], starts [n] -> ids [n, block_size] = [last, mask x (B-1)],
 * positions [n, block_size] = starts + 0..B-1. */
DFLASH_API int dflash_prepare_block(
    const int64_t* last_tokens, const int64_t* starts, int64_t n, int64_t mask_token_id, int64_t block_size,
    int64_t* ids, int64_t* positions, void* stream);
/* drafts_to_verify: draft_logits [n, k-1, vocab] (slots 1..k-1 of the drafter's block; strides as for logits
 * above) -> drafts [n, k-1] = argmax, verify_ids [n, k] = [last, drafts], and, when starts and verify_positions are
 * both non-NULL, verify_positions [n, k] = starts + 0..k-1 (the positions of the verify input tokens). */
DFLASH_API size_t dflash_drafts_to_verify_workspace_bytes(int64_t n, int64_t k, int64_t vocab);
DFLASH_API int dflash_drafts_to_verify(
    const int64_t* last_tokens, const void* draft_logits, int dtype, int64_t n, int64_t k, int64_t vocab,
    int64_t stride_n, int64_t stride_k, const int64_t* starts,
    int64_t* verify_ids, int64_t* drafts, int64_t* verify_positions,
    void* workspace, size_t workspace_bytes, void* stream);

/* ---- context bookkeeping (= dflash_trt.kernels.bookkeeping.commit_step) ----------------------------------------
 * For each row i of the step (slot s = slots[i], distinct), a = accepted[i]:
 *   target_lengths[s] = starts[i] + a + 1
 *   drafter_lengths[s] += context_counts[s]                  (the previous context is now in the drafter cache)
 *   context[s, 0..a] = features[i, 0..a]                     (rows > a keep their old contents)
 *   context_counts[s] = a + 1
 *   last_tokens[s] = target_tokens[i, a]                     (the bonus token)
 * Rows whose slot is outside 0..max_slots-1 are skipped (nothing out of bounds is written).
 * features [n, k, feat_dim] and context [max_slots, context_k >= k, feat_dim] share one dtype of elem_bytes (2 or
 * 4) bytes. The drafter group (features, context, context_counts, drafter_lengths) may be all NULL (AR) and the
 * pair (target_tokens, last_tokens) may be NULL. */
DFLASH_API int dflash_commit_step(
    int64_t n, int64_t k, const int64_t* accepted, const int64_t* slots, const int64_t* starts, int64_t max_slots,
    int64_t* target_lengths,
    const void* features, int64_t feat_dim, int elem_bytes, void* context, int64_t context_k,
    int64_t* context_counts, int64_t* drafter_lengths,
    const int64_t* target_tokens, int64_t* last_tokens, void* stream);

/* ---- draft trees (= dflash_trt.kernels.tree_accept) ------------------------------------------------------------
 * tree_accept (= tree_accept.tree_accept): a tree of num_nodes nodes per row (spec/tree.py's DraftTree: parents
 * before children, root parent -1, children of a node with distinct tokens), node_tokens / parents / depth
 * [n, num_nodes], target_tokens [n, num_nodes] the target's token at every node, stop_ids [n, num_stops] padded with
 * -1 (may be NULL when num_stops == 0), remaining [n], width = max depth + 1 (1..1024; num_nodes 1..1024).
 * A node is accepted when its token equals the target's token at its parent and its parent is accepted (the root
 * always is). Outputs: path [n, width] the accepted node at each depth, past the path's end its last node;
 * path_tokens [n, width] = target_tokens along the path; accepted [n], num_emitted [n], finished [n] (bool bytes) =
 * the chain rule (sample_accept.accept_tokens) along the path: drafts = node tokens of the path (-1 past it), stop ids,
 * budget. One launch, no workspace. */
DFLASH_API int dflash_tree_accept(
    int64_t n, int64_t num_nodes, const int64_t* node_tokens, const int64_t* parents, const int64_t* depth,
    const int64_t* target_tokens, const int64_t* stop_ids, int64_t num_stops, const int64_t* remaining, int64_t width,
    int64_t* path, int64_t* path_tokens, int64_t* accepted, int64_t* num_emitted, uint8_t* finished, void* stream);
/* compact_kv (= tree_accept.compact_kv), in place: k and v [layers, max_slots, capacity, kv_heads, head_dim], one
 * shape, contiguous, elements of elem_bytes (1, 2, 4 or 8) bytes copied as raw bytes; slots [n] (distinct), starts
 * [n], path [n, width] (1..1024). For each row i, layer and cache: position starts[i] + d of slot slots[i] gets the
 * vector of position starts[i] + path[i, d], d = 0..width-1, every source read before any destination is written
 * (gather, then scatter); depths d > 0 with path[i, d] == path[i, d-1] (tree_accept's padding past the path) are
 * skipped. Rows whose slot is outside 0..max_slots-1 and moves whose source or destination position is
 * outside 0..capacity-1 are skipped. n <= 65535, layers <= 32767. */
DFLASH_API int dflash_compact_kv(
    void* k, void* v, int elem_bytes, int64_t layers, int64_t max_slots, int64_t capacity, int64_t kv_heads,
    int64_t head_dim, int64_t n, const int64_t* slots, const int64_t* starts, const int64_t* path, int64_t width,
    void* stream);

#ifdef __cplusplus
}
#endif

#endif /* DFLASH_PLUGINS_H */
