"""The ops table of the spec step: one set of the per-step ops, chosen once per engine (draft trees add the last two).

    prepare_block(last, starts, mask_token_id, block_size)   -> (ids [N, B], positions [N, B])
    drafts_to_verify(last, draft_logits, starts)             -> (verify ids [N, K], drafts [N, K-1], positions [N, K])
    sample_accept(logits, drafts, temperature, top_k, top_p, keys, positions, stop_ids, remaining[, modes]) -> AcceptResult
    commit_step(accepted, slots, starts, target_lengths, ...)  in place
    tree_accept(node_tokens, parents, depth, target_tokens, stop_ids, remaining, width) -> (path, AcceptResult)
    compact_kv(k, v, slots, starts, path)                    in place

`reference_ops()`: the torch references (kernels/block_draft.py, sample_accept.py, bookkeeping.py, tree_accept.py) —
CPU, and CUDA without the plugin library. `plugin_ops()`: the CUDA kernels (kernels/cuda.py) on the current stream.
`library_ops(lib)`: a given plugin library called directly on the tensors' memory — the emulated build the CPU tests
run the whole step through. `ops_for(device)`: the kernels on a CUDA device where the library loads and runs, else the
references.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import torch

from dflash_trt.kernels import block_draft, bookkeeping, sample_accept
from dflash_trt.kernels import tree_accept as tree_ops


class StepOps(NamedTuple):
    name: str  # "reference", "cuda" or "library"
    prepare_block: Callable
    drafts_to_verify: Callable
    sample_accept: Callable
    commit_step: Callable
    tree_accept: Callable  # draft trees (spec/tree.py)
    compact_kv: Callable


def reference_ops() -> StepOps:
    return StepOps("reference", block_draft.prepare_block, block_draft.drafts_to_verify, sample_accept.sample_accept,
                   bookkeeping.commit_step, tree_ops.tree_accept, tree_ops.compact_kv)


def plugin_ops() -> StepOps:
    from dflash_trt.kernels import cuda

    return StepOps("cuda", cuda.prepare_block, cuda.drafts_to_verify, cuda.sample_accept, cuda.commit_step,
                   cuda.tree_accept, cuda.compact_kv)


def library_ops(lib) -> StepOps:
    """The library's entry points called with no stream on whatever memory the tensors are in (the emulated build
    runs the device code on CPU tensors)."""
    from dflash_trt.kernels import cuda

    def accept(*args, modes=None):  # the kernel reads the sampling parameters itself
        return sample_accept.AcceptResult(*cuda._sample_accept_lib(lib, None, *args))

    def tree_accept(*args):
        path, *res = cuda._tree_accept_lib(lib, None, *args)
        return path, sample_accept.AcceptResult(*res)

    return StepOps("library", functools.partial(cuda._prepare_block_lib, lib, None),
                   functools.partial(cuda._drafts_to_verify_lib, lib, None), accept,
                   functools.partial(cuda._commit_step_lib, lib, None), tree_accept,
                   functools.partial(cuda._compact_kv_lib, lib, None))


def traceable(ops: StepOps) -> StepOps:
    """The ops for a step torch.compile traces: the references' K/V compaction goes through the dflash::compact_kv
    custom op (whose CPU path is the reference itself), opaque to the compiler. Traced as plain torch, the reference's
    write through the whole [layers, slots, ...] K/V tensor is functionalized into a copy of the entire cache every
    step (CPU, tree:8: ~700 µs, the compiled tree step 2.7x slower than eager; through the op it is 1.3-1.4x faster)."""
    if ops.name != "reference":
        return ops
    from dflash_trt.kernels import cuda

    return ops._replace(compact_kv=cuda.compact_kv)


def ops_for(device: torch.device) -> StepOps:
    if device.type == "cuda":
        from dflash_trt.kernels import cuda

        if cuda.available(device):
            return plugin_ops()
    return reference_ops()
