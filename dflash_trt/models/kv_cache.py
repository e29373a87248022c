"""A pre-allocated KV cache with one length per sequence slot.

Layout [layer, slot, position, kv_head, head_dim]. Allocated once from (max batch, capacity); a forward writes new
K/V at each sequence's current length, and `set_lengths` commits how many of them to keep. Cropping after a partial
acceptance is therefore just a smaller length: rejected entries stay in memory and are overwritten next step.
"""

from __future__ import annotations

import torch


class SlotLengths:
    """The per-slot bookkeeping every engine cache shares (KVCache; HfKVCache behind transformers' Cache interface):
    `lengths` [max_batch] committed positions per slot, set by the subclass; cropping is a smaller length."""

    lengths: torch.Tensor

    def set_lengths(self, slots: torch.Tensor, lengths: torch.Tensor) -> None:
        """Commit (or crop to) `lengths` for `slots`."""
        self.lengths[slots] = lengths.to(self.lengths.dtype)

    def reset(self) -> None:
        self.lengths.zero_()


class KVCache(SlotLengths):
    def __init__(self, num_layers: int, max_batch: int, capacity: int, kv_heads: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str):
        shape = (num_layers, max_batch, capacity, kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.k_layers, self.v_layers = self.k.unbind(0), self.v.unbind(0)  # per-layer views, made once
        self.lengths = torch.zeros(max_batch, dtype=torch.long, device=device)
        self.capacity = capacity

    @property
    def max_batch(self) -> int:
        return self.k.shape[1]

    def kv_stores(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(K, V) tensors [layers, slot, position, kv_head, head_dim] holding every layer (what compact_kv moves)."""
        return [(self.k, self.v)]

    @staticmethod
    def where(slots: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The write index of slots [N] at positions [N, T], made once per forward for every layer's `write`."""
        return slots[:, None], positions

    def write(self, layer: int, where: tuple[torch.Tensor, torch.Tensor], k: torch.Tensor, v: torch.Tensor) -> None:
        """k/v [N, T, Hkv, D] into the slots at the positions of `where` (KVCache.where(slots, positions))."""
        self.k_layers[layer].index_put_(where, k)
        self.v_layers[layer].index_put_(where, v)

    def read(self, layer: int, slots: torch.Tensor | slice, upto: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first `upto` positions of each slot: [N, upto, Hkv, D] (entries past a slot's length are masked by the
        caller). `slots` may be a slice (consecutive slots): then the result is a view, nothing is copied."""
        return self.k_layers[layer][slots, :upto], self.v_layers[layer][slots, :upto]

def slot_view(slots: torch.Tensor, host_slots: list[int] | slice | None) -> torch.Tensor | slice:
    """How a forward reads the cache rows of `slots`: a slice when the caller knows (host_slots: the slots as a host
    list, or already as a slice) they are consecutive, else the index tensor."""
    if isinstance(host_slots, slice):
        return host_slots
    if host_slots and host_slots == list(range(host_slots[0], host_slots[0] + len(host_slots))):
        return slice(host_slots[0], host_slots[0] + len(host_slots))
    return slots


SPAN_ROWS_PER_SLOT = 1.5  # slot_span reads the span between non-consecutive slots while it has at most this many rows
#                           per slot (CPU, fixture pair, 15 of 16 slots: an AR step 7.9 ms gathered, 4.1 ms over the span)


def slot_span(slots: torch.Tensor, host_slots: list[int] | slice | tuple | None
              ) -> tuple[torch.Tensor | slice, torch.Tensor | None]:
    """Like slot_view, but non-consecutive slots known on the host whose span lo..hi has at most SPAN_ROWS_PER_SLOT
    rows per slot are read as that span (a view: nothing copied) instead of gathered (a copy of every row read, each
    layer, each step: the slow part of a step after requests left holes in the batch). Returns (what `read` takes,
    `within`: the slots' rows in what it returns, or None when those are the slots' rows in order). The rows between
    them belong to other slots (free, or not in this forward): a forward computes nothing it keeps for them
    (layers.attention(within=...)). host_slots may also be this function's answer, made before (a compiled step takes
    it built from ints, not from a host list)."""
    if isinstance(host_slots, tuple):
        return host_slots
    rows = slot_view(slots, host_slots)
    if isinstance(rows, slice) or not host_slots:
        return rows, None
    lo, hi = min(host_slots), max(host_slots)
    if hi + 1 - lo > SPAN_ROWS_PER_SLOT * len(host_slots):
        return rows, None
    return slice(lo, hi + 1), torch.tensor([s - lo for s in host_slots], device=slots.device)
