"""Per-slot state of a hybrid target's linear-attention (Gated DeltaNet) layers, and how verify-and-crop rolls it back.

Qwen3.5's `linear_attention` layers carry, per sequence, a causal-conv state (the last `conv_kernel` inputs of the
conv over q/k/v) and a recurrent state (one [key_dim x value_dim] matrix per value head) instead of a K/V history. The
engine's contract (HfTarget.forward, spec/step.py) is that a forward runs T new tokens per row at positions
lengths[slot] + 0..T-1 without advancing lengths, and that the engine then sets lengths[slot] to any kept length,
start + 1..T after a verify, the real prompt length after a right-padded prefill, start when a row is frozen, 0 for a
new request, directly on the `lengths` tensor. Attention layers honour that for free (a shorter length hides the
rejected K/V); a recurrent state has to be brought back to the committed length explicitly.

Design: lazy rollback by replay. Per slot the cache keeps two state buffers (`live` says which holds the committed
state) and, for the slot's last forward, its start and the input of every linear-attention layer over the T tokens (a
reference to the [N, T, hidden] tensor the layer received; no copy). A forward reads the live buffer and writes the
state after all T tokens into the other one. At the start of the slot's next forward (`begin`, from HfTarget.forward,
one host read of the rows' lengths) each row is brought to its committed length L:

* L = start + T (every token kept, e.g. every AR step): swap the buffers;
* start < L < start + T (a partial acceptance, or a right-padded prefill row): re-run each linear-attention layer —
  transformers' own module, with this object as its cache — on the row's saved inputs of the kept tokens,
  from the live (pre-forward) state into the other buffer, then swap: exactly the state transformers computes for
  that prefix from that state. The layer's input at a kept position depends on the kept prefix only (every layer is
  causal), so the saved inputs are the right ones. Rows are batched: one call per distinct kept length, or one per
  power of two (a row re-runs its kept tokens in binary pieces, each continuing from the last), whichever needs fewer
  calls (at most log2(T) + 1). Bookkeeping changes only after the swap: a replay that fails leaves the slot as it was;
* L = start: nothing (the live buffer still holds the state at start);
* L = 0: a new sequence, the zero state.
A length the slot's state cannot be brought to (set by hand, never reached by a forward: `SpecStep.time_step` times
steps at dummy lengths) also gives the zero state, so a timing run computes on defined values; the engine never does
this for a request. Padded prefill tokens therefore never reach a row's state: the row is replayed to its real length.

Why replay rather than per-position snapshots (Qwen3.5 as transformers' `Qwen3_5TextConfig` defaults it, the 9B
shape: hidden 4096, 32 layers of which 24 linear, 16 key heads x 128 and 32 value heads x 128, conv kernel 4; bf16
weights, the recurrent state float32 as transformers' gated-delta kernels keep it):

* state per linear layer per slot: recurrent 32 x 128 x 128 x 4 B = 2 MiB, conv (2 x 16 x 128 + 32 x 128 = 8192
  channels) x 4 x 2 B = 64 KiB: 2.06 MiB, 49.5 MiB per slot over 24 layers;
* snapshots after every position of a K = 16 window: 16 x 49.5 = 792 MiB per slot (25 GiB for 32 slots), written
  every step whatever is accepted, and transformers' chunked kernel returns only the final state (per-position states
  would need a kernel of our own or T one-token steps);
* replay: a second state buffer (49.5 MiB per slot) plus the saved inputs, 16 x 4096 x 2 B x 24 = 3 MiB per slot; the
  cost is compute, only for rows that kept part of their block: the layers' token mixers (projections, conv, gated
  delta rule, out_proj) over at most T - 1 tokens, in at most log2(T) + 1 batched calls per layer — about 67 M
  multiply-adds per token per layer, under a third of a linear layer's (MLP included), and on a GPU at small batch
  one more read of the mixers' weights (3.2 GB bf16 for the 24 layers) per call. A prefill of ragged rows re-runs the
  shorter rows' prompts through the mixers once more and keeps its layer inputs (layers x rows x T x hidden) until
  those slots' next forward.
The state it leaves is transformers' own computation of the kept prefix from the committed state: the same module
code, so it stays right for any family that drives its linear layers through transformers' Cache API (get/update of
conv and recurrent state: Qwen3.5, Qwen3.5-MoE, Qwen3-Next) — nothing of the Gated DeltaNet math is re-implemented
here. A cheaper replay (no weight re-reads) would save the gated-delta kernel's own inputs (k, v, g, beta) and re-run
only the kernel with g = beta = 0 past each row's kept length (exact no-op tokens, one call per layer), but that means
re-deriving each family's projection glue outside transformers; not done.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class _Window:
    """One forward's saved layer inputs: layer index -> [N, T, hidden] (row i is the forward's i-th slot)."""

    inputs: dict[int, torch.Tensor]
    tokens: int


def _stages(kept: list[int]) -> list[tuple[list[int], list[int], int]]:
    """How to re-run rows' kept tokens in few batched calls: a list of (row indices, start offset per row, length).
    One call per distinct kept length, or one per power of two (binary pieces, longest first), whichever is fewer."""
    by_length: dict[int, list[int]] = {}
    for i, k in enumerate(kept):
        by_length.setdefault(k, []).append(i)
    grouped = [(rows, [0] * len(rows), k) for k, rows in sorted(by_length.items())]
    binary = []
    done = [0] * len(kept)
    size = 1 << (max(kept).bit_length() - 1)
    while size:
        rows = [i for i, k in enumerate(kept) if k - done[i] >= size]
        if rows:
            binary.append((rows, [done[i] for i in rows], size))
            for i in rows:
                done[i] += size
        size >>= 1
    return grouped if len(grouped) <= len(binary) else binary


def cache_keyword(forward, before: str) -> str:
    """The keyword a transformers module's forward takes its cache by: `cache` from transformers 5.24 on, `before`
    (its older name: `cache_params` for linear-attention layers, `past_key_values` for decoders) until then."""
    return "cache" if "cache" in inspect.signature(forward).parameters else before


class LinearStates:
    """The conv and recurrent states of a hybrid target's linear-attention layers for every slot, behind the part of
    transformers' Cache interface those layers call (see the module docstring). Owned by HfKVCache, which forwards
    the layers' calls here; during a replay this object is itself the layers' cache (the `cache` argument;
    `cache_params` before transformers 5.24)."""

    @staticmethod
    def bytes_per_slot(modules: dict[int, nn.Module], dtype: torch.dtype) -> int:
        """Memory one slot's states take (both buffers), for the engine's memory check."""
        return sum(2 * (m.conv_dim * m.conv_kernel_size * dtype.itemsize
                        + m.num_v_heads * m.head_k_dim * m.head_v_dim * 4) for m in modules.values())

    def __init__(self, modules: dict[int, nn.Module], max_batch: int, dtype: torch.dtype, device: torch.device | str):
        self.modules = modules  # layer index -> its linear-attention module (transformers' GatedDeltaNet)
        self.cache_kwarg = {i: cache_keyword(m.forward, "cache_params") for i, m in modules.items()}
        self.conv: dict[int, torch.Tensor] = {}  # [2, slot, conv channels, conv kernel] (two buffers per slot)
        self.recurrent: dict[int, torch.Tensor] = {}  # [2, slot, value heads, key dim, value dim], float32
        for i, m in modules.items():
            self.conv[i] = torch.zeros(2, max_batch, m.conv_dim, m.conv_kernel_size, dtype=dtype, device=device)
            self.recurrent[i] = torch.zeros(2, max_batch, m.num_v_heads, m.head_k_dim, m.head_v_dim,
                                            dtype=torch.float32, device=device)
        self.live = torch.zeros(max_batch, dtype=torch.long, device=device)  # which buffer holds the committed state
        # host bookkeeping per slot: the length the live buffer's state is at (-1: unknown), and the last forward
        self.state_length = [0] * max_batch
        self.pending: list[tuple[_Window, int] | None] = [None] * max_batch
        self._read: tuple[torch.Tensor, torch.Tensor] | None = None  # (buffer [n], slots [n]) the layers read
        self._write: tuple[torch.Tensor, torch.Tensor] | None = None  # ... and write
        self._inputs: dict[int, torch.Tensor] | None = None  # the running forward's layer inputs

    # ---- a forward -----------------------------------------------------------------------------------------------

    def begin(self, slots: torch.Tensor, host_slots: list[int], lengths: list[int]) -> None:
        """Before a forward of `slots` (host_slots: the same on the host, lengths: their committed lengths): bring each
        row's state to its length, then let the layers read the live buffers and write the others."""
        self.settle(host_slots, lengths)
        live = self.live[slots]
        self._read, self._write, self._inputs = (live, slots), (1 - live, slots), {}

    def end(self, host_slots: list[int], tokens: int, completed: bool) -> None:
        """After the forward: remember its inputs for the rows' next `begin` (a failed forward leaves the rows' states
        as they were: the live buffers were only read)."""
        inputs = self._inputs
        self._read = self._write = self._inputs = None
        if completed:
            missing = set(self.modules) - set(inputs or {})
            if missing:
                raise RuntimeError(f"linear-attention layer(s) {sorted(missing)} ran without their inputs recorded")
            window = _Window(inputs, tokens)
            for row, slot in enumerate(host_slots):
                self.pending[slot] = (window, row)

    def record(self, layer_idx: int, hidden_states: torch.Tensor) -> None:
        """A linear-attention layer's input in the running forward (from HfTarget's forward pre-hook)."""
        if self._inputs is not None:
            self._inputs[layer_idx] = hidden_states

    def reset(self) -> None:
        self.pending = [None] * len(self.pending)
        self.state_length = [-1] * len(self.state_length)  # the next forward of each slot starts from the zero state

    # ---- rollback ------------------------------------------------------------------------------------------------

    @torch.no_grad()
    def settle(self, host_slots: list[int], lengths: list[int]) -> None:
        """Bring each slot's live state to its committed length (see the module docstring). Each slot's bookkeeping
        changes only once its state is there: if a replay fails (out of memory, say), the slots it was for keep their
        pending window and committed state, and the next forward starts over."""
        swap, zero, replay, dropped = [], [], [], []
        for slot, length in zip(host_slots, lengths):
            pending = self.pending[slot]
            if pending is not None:
                window, row = pending
                kept = length - self.state_length[slot]
                if kept == window.tokens:
                    swap.append((slot, length))
                    continue
                if 0 < kept < window.tokens:
                    replay.append((window, row, slot, kept, length))
                    continue
                dropped.append(slot)  # nothing kept (the state is still the start's), or a length out of the window
            if length != self.state_length[slot]:  # 0: a new sequence; else a length no forward reached
                zero.append((slot, length))
        for slot in dropped:
            self.pending[slot] = None
        device = self.live.device
        if swap:
            s = torch.tensor([slot for slot, _ in swap], device=device)
            self.live[s] = 1 - self.live[s]
            self._committed(swap)
        if zero:
            s = torch.tensor([slot for slot, _ in zero], device=device)
            where = (self.live[s], s)
            for layer in self.modules:
                self.conv[layer][where] = 0
                self.recurrent[layer][where] = 0
            self._committed(zero)
        for window in {id(w): w for w, *_ in replay}.values():
            jobs = [(row, slot, kept, length) for w, row, slot, kept, length in replay if w is window]
            rows, slots, kept, lengths_ = map(list, zip(*jobs))
            self._replay(window, rows, slots, kept)
            self._committed(list(zip(slots, lengths_)))

    def _committed(self, done: list[tuple[int, int]]) -> None:
        for slot, length in done:
            self.pending[slot] = None
            self.state_length[slot] = length

    def _replay(self, window: _Window, rows: list[int], slots: list[int], kept: list[int]) -> None:
        """Re-run the kept tokens of `rows` of `window` through every linear-attention layer, from the live states of
        `slots` into their other buffers, which become the live ones once every piece has run (a failure leaves the
        live states untouched)."""
        device = self.live.device
        slot_ids = torch.tensor(slots, device=device)
        target = 1 - self.live[slot_ids]  # per row: the buffer the replay writes
        source = self.live[slot_ids].clone()  # per row: the buffer its next piece reads (the target after its first)
        for indices, offsets, size in _stages(kept):
            i = torch.tensor(indices, device=device)
            sel = slot_ids[i]
            r = torch.tensor([rows[j] for j in indices], device=device)
            cols = torch.tensor(offsets, device=device)[:, None] + torch.arange(size, device=device)
            self._read, self._write = (source[i], sel), (target[i], sel)
            try:
                for layer, module in self.modules.items():
                    module(hidden_states=window.inputs[layer][r[:, None], cols], attention_mask=None,
                           **{self.cache_kwarg[layer]: self})
            finally:
                self._read = self._write = None
            source[i] = target[i]
        self.live[slot_ids] = target

    # ---- what transformers' linear-attention layers call (transformers.cache_utils.Cache) -------------------------

    def _where(self, which) -> tuple[torch.Tensor, torch.Tensor]:
        if which is None:
            raise RuntimeError("linear-attention state used outside HfTarget.forward: this cache is driven by HfTarget "
                               "only")
        return which

    def is_recording_past(self, layer_idx: int) -> bool:
        """True: the layers then always pass their conv input through `update_conv_state` (never the in-place
        one-token conv update on the state they read)."""
        return True

    def has_previous_state(self, layer_idx: int | None = None, state_idx: int | None = None) -> bool:
        return True

    def get_recurrent_states_to_keep(self, layer_idx: int | None = None) -> int:
        """0: no intermediate recurrent states (transformers asks from 5.25 on, as the past is recorded). A rollback
        replays the committed tokens' recorded inputs instead (`end`)."""
        return 0

    def get_conv_state(self, layer_idx: int, state_idx: int = 0) -> torch.Tensor:
        """The rows' conv states [N, channels, kernel] (a copy: the layer may not alter the stored one)."""
        return self.conv[layer_idx][self._where(self._read)]

    def get_recurrent_state(self, layer_idx: int, state_idx: int = 0) -> torch.Tensor:
        """The rows' recurrent states [N, value heads, key dim, value dim] (a copy)."""
        return self.recurrent[layer_idx][self._where(self._read)]

    def update_conv_state(self, conv_states: torch.Tensor, layer_idx: int, state_idx: int = 0, **kwargs) -> torch.Tensor:
        """conv_states: the new conv inputs [N, channels, T] -> the rows' conv state followed by them (what the layer
        convolves); the last `kernel` columns are the state after the T tokens."""
        store = self.conv[layer_idx]
        full = torch.cat([store[self._where(self._read)].to(conv_states.dtype), conv_states], dim=-1)
        store[self._where(self._write)] = full[..., -store.shape[-1]:].to(store.dtype)
        return full

    def update_recurrent_state(self, recurrent_states: torch.Tensor, layer_idx: int, state_idx: int = 0,
                               **kwargs) -> torch.Tensor:
        store = self.recurrent[layer_idx]
        store[self._where(self._write)] = recurrent_states.to(store.dtype)
        return recurrent_states
