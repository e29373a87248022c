"""The device-side decode loop: `steps_per_sync` speculative steps back to back with no host synchronisation, each
one replayable as a CUDA graph, then one host read of what they produced.

`BatchScheduler` (engines/scheduler.py) reads every step's accepted lengths and tokens on the host (one sync per
step) and sizes its attention from host-side lengths. `DeviceLoopScheduler` keeps the same requests API (add / step /
abort, in-flight batching, the same prefill) and replaces the decode with a window of steps whose every input and
output lives in persistent device buffers:

    per slot   last token, drafter context [K rows] + count, sampling state, token budget, tokens produced,
               done flag, output tokens [max_seq_len], the window's τ log
    one step   prepare_block -> drafter -> drafts_to_verify -> target verify -> sample_accept -> append the emitted
               tokens to the slot's output row -> commit_step (crop both caches, next context, bonus token)

Static shapes: the batch is padded to a bucket size with free slots (marked done, so they emit nothing and their
caches do not advance), and attention runs over a length bucket that bounds every slot's length for the whole window
(host-side lengths from the last sync + steps * K, rounded up to a power of two). A request that finishes inside the
window (stop token, budget) is marked done on the device: it emits nothing more and its caches stop advancing; the
host notices at the window's end, where it reads produced counts, done flags, new tokens and the τ log in one
transfer and releases finished slots. Prompts are ingested into the drafter cache at prefill, so a steady-state step
never carries more than K context rows.

On CUDA with the plugin library (kernels/cuda.py) each (bucket, length) step is captured once as a CUDA graph and
replayed; the torch references (used on CPU, and on CUDA without the library, eagerly) compute the same thing, and the
CPU tests check that the outputs equal the host loop's and AR's token for token. Greedy and sampled outputs do not
depend on the window: the sampling noise is keyed by (seed, position).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

from dflash_trt.engines.scheduler import BatchScheduler, StepEvent
from dflash_trt.errors import ConfigError
from dflash_trt.kernels import block_draft as block_ref
from dflash_trt.kernels import bookkeeping as book_ref
from dflash_trt.kernels import sample_accept as sa_ref

if TYPE_CHECKING:
    from dflash_trt.engines.torch_engine import TorchEngine

MIN_LENGTH_BUCKET = 64


def bucket_sizes(max_batch_size: int) -> list[int]:
    """Batch buckets: powers of two below max_batch_size, and max_batch_size."""
    sizes, b = [], 1
    while b < max_batch_size:
        sizes.append(b)
        b *= 2
    return sizes + [max_batch_size]


def length_bucket(length: int, capacity: int) -> int:
    """The attention length a window runs with: the next power of two >= length (at least 64), at most capacity."""
    b = MIN_LENGTH_BUCKET
    while b < length:
        b *= 2
    return min(b, capacity)


class _Ops:
    """The step's four ops: the CUDA kernels (torch.ops.dflash.*) or their torch references."""

    def __init__(self, kernels: bool):
        if kernels:
            from dflash_trt.kernels import cuda

            self.prepare_block, self.sample_accept, self.commit_step = cuda.prepare_block, cuda.sample_accept, cuda.commit_step
            self.drafts_to_verify = lambda last, logits, starts: cuda.drafts_to_verify(last, logits, starts)[:2]
        else:
            self.prepare_block, self.sample_accept, self.commit_step = (block_ref.prepare_block, sa_ref.sample_accept,
                                                                        book_ref.commit_step)
            self.drafts_to_verify = lambda last, logits, starts: block_ref.drafts_to_verify_input(last, logits)


class DeviceLoopScheduler(BatchScheduler):
    """BatchScheduler with a device-side decode loop (see the module docstring).

    steps_per_sync: steps per window (the host reads results once per window). cuda_graphs: capture and replay each
    (bucket, length) step on CUDA (needs the plugin library; without it the step runs eagerly on the references).
    kernels: use the plugin kernels (default: on CUDA when the library is available)."""

    def __init__(self, engine: "TorchEngine", *, block_size: int | None = None, use_drafter: bool = True,
                 steps_per_sync: int = 4, cuda_graphs: bool = True, kernels: bool | None = None):
        super().__init__(engine, block_size=block_size, use_drafter=use_drafter)
        if isinstance(steps_per_sync, bool) or not isinstance(steps_per_sync, int) or steps_per_sync < 1:
            raise ConfigError(f"steps_per_sync must be an integer >= 1, got {steps_per_sync!r}")
        dev, n = engine.device, engine.max_batch_size
        if kernels is None:
            kernels = False
            if dev.type == "cuda":
                from dflash_trt.kernels import cuda

                kernels = cuda.available(dev)
        self.steps_per_sync = steps_per_sync
        self.kernels = bool(kernels)
        self.cuda_graphs = bool(cuda_graphs) and dev.type == "cuda" and self.kernels
        self._ops = _Ops(self.kernels)
        self._budget = torch.zeros(n, dtype=torch.long, device=dev)
        self._produced = torch.zeros(n, dtype=torch.long, device=dev)
        self._done = torch.ones(n, dtype=torch.bool, device=dev)
        self._out = torch.zeros(n, engine.max_seq_len + self.k, dtype=torch.long, device=dev)  # last K: a dump area
        self._tau_log = torch.zeros(steps_per_sync, n, dtype=torch.long, device=dev)
        self._step_index = torch.zeros((), dtype=torch.long, device=dev)
        self._buckets = bucket_sizes(n)
        self._rows: dict[int, torch.Tensor] = {b: torch.zeros(b, dtype=torch.long, device=dev) for b in self._buckets}
        self._graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}
        self._pool = None
        self.graph_replays = 0  # steps run by replaying a captured graph (the rest ran eagerly)
        if self.spec:  # a fixed-width context buffer: after prefill a slot never holds more than K new rows
            self._context = torch.zeros(n, self.k, engine.drafter.fc.in_features,
                                        dtype=engine.target.lm_head.weight.dtype, device=dev)

    # ---- prefill: the base prefill, then the device state of the new slots --------------------------------------------

    def _prefill(self, new) -> Iterator[StepEvent]:
        events = list(super()._prefill(new))  # bookkeeping done, events held back (a consumer may abort between them)
        live = [r for r in new if self._active.get(r.slot) is r]
        if live:
            dev = self.engine.device
            slots = torch.tensor([r.slot for r in live], device=dev)
            self._budget[slots] = torch.tensor([r.params.max_new_tokens for r in live], device=dev)
            self._produced[slots] = 1
            self._out[slots, 0] = self._last[slots]
            self._done[slots] = False
        yield from events

    def _set_prompt_context(self, slots: torch.Tensor, features: torch.Tensor, lens: torch.Tensor) -> None:
        """The prompt's features go straight into the drafter cache (its first context), so every decode step carries
        at most K context rows per slot, in the fixed-size buffer the captured steps read."""
        cache = self.engine.drafter_cache
        self.engine.drafter.ingest(features, lens, cache, slots)
        cache.set_lengths(slots, cache.lengths[slots] + lens)
        self._context_counts[slots] = 0

    # ---- one step, device-only ---------------------------------------------------------------------------------------

    def _device_step(self, rows: torch.Tensor, upto: int) -> None:
        """One speculative step for the slots in `rows` (active + padding), attention over `upto` positions. Reads and
        writes only persistent device buffers; no host reads (capturable)."""
        engine, k, ops = self.engine, self.k, self._ops
        n = rows.shape[0]
        starts = engine.target_cache.lengths[rows]
        last = self._last[rows]
        was_done = self._done[rows]
        if self.spec:
            drafter = engine.drafter
            counts = self._context_counts[rows]
            drafter_starts = engine.drafter_cache.lengths[rows]
            block_ids, block_pos = ops.prepare_block(last, starts, drafter.mask_token_id, drafter.block_size)
            hidden = drafter(engine.target.embed(block_ids), block_pos, self._context[rows], counts,
                             engine.drafter_cache, rows, upto)
            verify_ids, drafts = ops.drafts_to_verify(last, engine.target.logits(hidden[:, 1:k]), starts)
        else:
            verify_ids, drafts = last[:, None], torch.empty(n, 0, dtype=torch.long, device=rows.device)
        logits, features = engine.target(verify_ids, engine.target_cache, rows, tap=self.spec, max_length=upto)
        positions = starts[:, None] + 1 + torch.arange(k, device=rows.device)
        produced = self._produced[rows]
        remaining = (self._budget[rows] - produced).clamp_min(1)  # done rows: any budget, their emission is dropped
        res = ops.sample_accept(logits, drafts, self._temperature[rows], self._top_k[rows], self._top_p[rows],
                                self._keys[rows], positions, self._stop_ids[rows], remaining)
        emitted = torch.where(was_done, 0, res.num_emitted)
        # Append the emitted tokens to each slot's output row; the rest go to the dump columns at the end.
        j = torch.arange(k, device=rows.device)
        dump = self._out.shape[1] - k + j
        cols = torch.where(j[None, :] < emitted[:, None], produced[:, None] + j, dump)
        self._out.index_put_((rows[:, None].expand(n, k), cols), res.target_tokens)
        self._produced[rows] = produced + emitted
        self._done[rows] = was_done | res.finished
        self._tau_log.index_put_((self._step_index.expand(n), rows), torch.where(was_done, 0, res.accepted + 1))
        self._step_index += 1
        if self.spec:
            ops.commit_step(res.accepted, rows, starts, engine.target_cache.lengths, features.to(self._context.dtype),
                            self._context, self._context_counts, engine.drafter_cache.lengths, res.target_tokens,
                            self._last)
            # Done rows (finished earlier in the window, or padding) do not advance.
            engine.drafter_cache.lengths[rows] = torch.where(was_done, drafter_starts, engine.drafter_cache.lengths[rows])
            self._context_counts[rows] = torch.where(was_done, counts, self._context_counts[rows])
        else:
            ops.commit_step(res.accepted, rows, starts, engine.target_cache.lengths, target_tokens=res.target_tokens,
                            last_tokens=self._last)
        engine.target_cache.lengths[rows] = torch.where(was_done, starts, engine.target_cache.lengths[rows])

    def _run_step(self, bucket: int, upto: int) -> None:
        rows = self._rows[bucket]
        key = (bucket, upto)
        if not self.cuda_graphs:
            self._device_step(rows, upto)
            return
        graph = self._graphs.get(key)
        if graph is None:  # the first step of this shape runs eagerly (warms up cuBLAS, the plugins), then is captured
            self._device_step(rows, upto)
            torch.cuda.synchronize(self.engine.device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool):
                self._device_step(rows, upto)
            self._pool = graph.pool()
            self._graphs[key] = graph
            # Capture recorded the step without running it; the eager run above already was this step.
            return
        graph.replay()
        self.graph_replays += 1

    # ---- the window --------------------------------------------------------------------------------------------------

    def _decode(self) -> Iterator[StepEvent]:
        engine, dev, k = self.engine, self.engine.device, self.k
        t0 = time.perf_counter()
        active = self._begin_decode()
        bucket = next(b for b in self._buckets if b >= len(active))
        pad = self._free[: bucket - len(active)]
        rows = self._rows[bucket]
        rows.copy_(torch.tensor(active + pad, device=dev))
        if pad:  # free slots ride along as padding: done, empty caches (they emit nothing and do not advance)
            p = torch.tensor(pad, device=dev)
            self._done[p] = True
            engine.target_cache.lengths[p] = 0
            if self.spec:
                engine.drafter_cache.lengths[p] = 0
                self._context_counts[p] = 0
        upto = length_bucket(max(self._target_len[s] for s in active) + self.steps_per_sync * k,
                             engine.target_cache.capacity)
        self._tau_log.zero_()
        self._step_index.zero_()
        before = {s: len(self._active[s].outputs) for s in active}
        for _ in range(self.steps_per_sync):
            self._run_step(bucket, upto)
        # One host read for the whole window.
        act = torch.tensor(active, device=dev)
        produced, done = self._produced[act].tolist(), self._done[act].tolist()
        lengths = engine.target_cache.lengths[act].tolist()
        taus = self._tau_log[:, act].t().tolist()
        out = self._out[act, : max(produced)].tolist()
        elapsed = time.perf_counter() - t0
        self.decode_s += elapsed
        events = []
        for row, s in enumerate(active):
            req = self._active[s]
            new = out[row][before[s]: produced[row]]
            req.outputs.extend(new)
            req.stats.taus.extend(t for t in taus[row] if t > 0)
            req.stats.decode_s += elapsed
            self._target_len[s] = lengths[row]
            events.append(self._finish(req, new) if done[row] else StepEvent(req.request_id, new, False))
        yield from events
