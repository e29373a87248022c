"""A pre-allocated KV cache with one length per sequence slot.

Layout [layer, slot, position, kv_head, head_dim]. Allocated once from (max batch, capacity); a forward writes new
K/V at each sequence's current length, and `set_lengths` commits how many of them to keep. Cropping after a partial
acceptance is therefore just a smaller length: rejected entries stay in memory and are overwritten next step.
"""

from __future__ import annotations

import torch


class KVCache:
    def __init__(self, num_layers: int, max_batch: int, capacity: int, kv_heads: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str):
        shape = (num_layers, max_batch, capacity, kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = torch.zeros(max_batch, dtype=torch.long, device=device)
        self.capacity = capacity

    @property
    def max_batch(self) -> int:
        return self.k.shape[1]

    def write(self, layer: int, slots: torch.Tensor, positions: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """k/v [N, T, Hkv, D] into slots [N] at positions [N, T]."""
        index = (slots[:, None], positions)
        self.k[layer].index_put_(index, k)
        self.v[layer].index_put_(index, v)

    def read(self, layer: int, slots: torch.Tensor, upto: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first `upto` positions of each slot: [N, upto, Hkv, D] (entries past a slot's length are masked by the caller)."""
        return self.k[layer, slots, :upto], self.v[layer, slots, :upto]

    def set_lengths(self, slots: torch.Tensor, lengths: torch.Tensor) -> None:
        """Commit (or crop to) `lengths` for `slots`."""
        self.lengths[slots] = lengths.to(self.lengths.dtype)

    def reset(self) -> None:
        self.lengths.zero_()
