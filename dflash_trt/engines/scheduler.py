"""In-flight (continuous) batching for the torch engine: a slot-based batch that requests join and leave between steps.

`BatchScheduler` owns the engine's pre-allocated, slot-indexed KV caches while it lives. Requests are `add`ed at any
time (validated right away, exactly as `TorchEngine.generate` validates) and wait in a FIFO queue; at the start of
each `step` waiting requests take free slots (lowest first) and are prefilled — the new slots only, at their own
lengths — then one speculative step (draft -> verify -> accept -> bookkeeping) runs for every active slot. A request
leaves its slot as soon as it finishes (stop token or budget) or is `abort`ed, and the next waiting request takes it.

The sampling noise is keyed by (seed, absolute position), so a request's tokens do not depend on which other
requests share its steps: greedy or sampled, joining mid-run gives the same output as running alone.

Drafter context: a running slot's context is the features of the tokens its previous step verified (<= K rows); a
freshly joined slot's first context is the features of its own prompt, from its own prefill. On a step where both
kinds are active the drafter runs once per kind (the prompt context can be far wider than K, and writing it for the
running slots too would run past their cache capacity); every other part of the step is one batched call.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from dflash_trt.errors import RequestError
from dflash_trt.kernels.sample_accept import sample_accept
from dflash_trt.spec.sampling import SamplingParams, seed_keys
from dflash_trt.spec.stats import Stats

if TYPE_CHECKING:
    from dflash_trt.engines.torch_engine import Result, TorchEngine


@dataclass
class StepEvent:
    """Tokens appended to one request by one step (what `TorchEngine.stream` and `BatchScheduler.step` yield).

    `index` is the request's position in the prompts passed to generate/stream, or the request id given to
    `BatchScheduler.add`. On the request's last event `finished` is True and `finish_reason` ("stop" or "length")
    and `result` (the complete Result) are set."""

    index: Hashable
    token_ids: list[int]
    finished: bool
    finish_reason: str | None = None
    result: "Result | None" = None


@dataclass(eq=False)
class _Request:
    request_id: Hashable
    ids: list[int]
    params: SamplingParams
    seed: int
    stops: list[int]
    stats: Stats
    slot: int = -1
    outputs: list[int] = field(default_factory=list)


class BatchScheduler:
    """Step-level API over a TorchEngine: add / step / abort, up to engine.max_batch_size requests at a time.

    block_size (K <= the drafter's block) and use_drafter are fixed for the scheduler's life (one K per batch). Only
    one scheduler (or generate/stream call) may use an engine at a time: they share its caches."""

    def __init__(self, engine: "TorchEngine", *, block_size: int | None = None, use_drafter: bool = True):
        self.engine = engine
        self.spec = use_drafter and engine.drafter is not None
        self.k = engine._verify_len(block_size, self.spec)
        n, dev = engine.max_batch_size, engine.device
        self._free: list[int] = list(range(n))  # sorted: the lowest free slot is taken first
        self._waiting: deque[_Request] = deque()
        self._active: dict[int, _Request] = {}  # slot -> request (prefilled)
        self._ids: dict[Hashable, _Request] = {}
        # per-slot sampling state, as tensors so acceptance is vectorised across the batch
        self._temperature = torch.zeros(n, device=dev)
        self._top_k = torch.zeros(n, dtype=torch.long, device=dev)
        self._top_p = torch.ones(n, device=dev)
        self._keys = torch.zeros(n, dtype=torch.long, device=dev)
        self._stop_ids = torch.full((n, 1), -1, dtype=torch.long, device=dev)
        self._last = torch.zeros(n, dtype=torch.long, device=dev)  # each slot's last verified token
        self._context: torch.Tensor | None = None  # [n, W, F] features not yet in the drafter cache
        self._context_counts = torch.zeros(n, dtype=torch.long, device=dev)
        # host mirrors of the lengths (so no forward needs a device sync to size its attention)
        self._target_len = [0] * n
        self._drafter_len = [0] * n
        self._context_len = [0] * n
        self.prefill_s = 0.0  # total time spent in prefills / decode steps (what generate reports per run)
        self.decode_s = 0.0
        self.max_active = 0  # the largest number of requests that shared one decode step
        self.last_batch_size = 0  # requests in the latest decode step
        engine.target_cache.reset()
        if self.spec:
            engine.drafter_cache.reset()

    # ---- queries -----------------------------------------------------------------------------------------------------

    @property
    def num_active(self) -> int:
        """Requests holding a slot."""
        return len(self._active)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def has_work(self) -> bool:
        return bool(self._active or self._waiting)

    def __contains__(self, request_id: Hashable) -> bool:
        return request_id in self._ids

    def stats_of(self, request_id: Hashable) -> Stats | None:
        """A live request's Stats so far (None if unknown or finished: finished requests carry theirs in the Result)."""
        req = self._ids.get(request_id)
        return req.stats if req is not None else None

    def slot_of(self, request_id: Hashable) -> int | None:
        """The slot a request holds, None while it waits (or if unknown)."""
        req = self._ids.get(request_id)
        return req.slot if req is not None and req.slot >= 0 else None

    # ---- requests ----------------------------------------------------------------------------------------------------

    def validate(self, prompt: str | Sequence[int], params: SamplingParams | None, label: str = "request") -> tuple[list[int], SamplingParams]:
        """The checks generate runs (sampling parameters, prompt, length budget); returns (token ids, params)."""
        engine = self.engine
        params = SamplingParams() if params is None else params
        if not isinstance(params, SamplingParams):
            raise RequestError(f"{label}: params must be a SamplingParams, got {type(params).__name__}")
        params.validate(engine.target.cfg.vocab_size)
        ids = engine._encode(prompt)
        if len(ids) + params.max_new_tokens > engine.max_seq_len:
            raise RequestError(
                f"{label}: {len(ids)} prompt tokens + max_new_tokens {params.max_new_tokens} exceeds max_seq_len "
                f"{engine.max_seq_len}; shorten the prompt, lower max_new_tokens or raise max_seq_len"
            )
        return ids, params

    def add(self, request_id: Hashable, prompt: str | Sequence[int], params: SamplingParams | None = None, *,
            label: str | None = None) -> None:
        """Queue a request; it is prefilled at the next step that finds a free slot. Raises RequestError (and queues
        nothing) if the request is invalid or the id is already in use. `label` names the request in error messages
        (default: "request <id>")."""
        if request_id in self._ids:
            raise RequestError(f"request id {request_id!r} is already in use; give each live request its own id")
        ids, params = self.validate(prompt, params, label or f"request {request_id!r}")
        req = _Request(request_id, ids, params, params.resolved_seed(), self.engine._stop_ids(params),
                       Stats(block_size=self.k))
        self._ids[request_id] = req
        self._waiting.append(req)

    def abort(self, request_id: Hashable) -> bool:
        """Drop a request (waiting or running) and free its slot. Returns False if the id is unknown/finished."""
        req = self._ids.pop(request_id, None)
        if req is None:
            return False
        if req.slot >= 0:
            self._release(req.slot)
        else:
            self._waiting.remove(req)
        return True

    def _release(self, slot: int) -> None:
        del self._active[slot]
        bisect.insort(self._free, slot)

    # ---- the step ----------------------------------------------------------------------------------------------------

    def step(self) -> list[StepEvent]:
        """Admit waiting requests into free slots (prefill), then one speculative step for every active slot."""
        return list(self.step_iter())

    @torch.inference_mode()
    def step_iter(self) -> Iterator[StepEvent]:
        """Like step, but yields each event as soon as it exists (prefill events before the decode step runs)."""
        new: list[_Request] = []
        while self._waiting and self._free:
            req = self._waiting.popleft()
            req.slot = self._free.pop(0)
            new.append(req)
        if new:
            yield from self._prefill(new)
        if self._active:
            yield from self._decode()

    def _finish(self, req: _Request, new: list[int]) -> StepEvent:
        from dflash_trt.engines.torch_engine import Result

        engine = self.engine
        reason = "stop" if new and new[-1] in req.stops else "length"
        req.stats.new_tokens = len(req.outputs)
        text = engine.tokenizer.decode(req.outputs, skip_special_tokens=True) if engine.tokenizer is not None else None
        result = Result(req.outputs, text, reason, req.stats, req.ids)
        self._ids.pop(req.request_id, None)
        self._release(req.slot)
        return StepEvent(req.request_id, new, True, reason, result)

    def _widen_stops(self, width: int) -> None:
        if width > self._stop_ids.shape[1]:
            pad = torch.full((self._stop_ids.shape[0], width - self._stop_ids.shape[1]), -1, dtype=torch.long,
                             device=self._stop_ids.device)
            self._stop_ids = torch.cat([self._stop_ids, pad], dim=1)

    def _prefill(self, new: list[_Request]) -> Iterator[StepEvent]:
        """Prompt into the target cache of the new slots only; their first token; their prompt features become their
        first drafter context."""
        engine, dev, m = self.engine, self.engine.device, len(new)
        t0 = time.perf_counter()
        slot_list = [r.slot for r in new]
        slots = torch.tensor(slot_list, device=dev)
        self._temperature[slots] = torch.tensor([float(r.params.temperature) for r in new], device=dev)
        self._top_k[slots] = torch.tensor([r.params.top_k for r in new], device=dev)
        self._top_p[slots] = torch.tensor([float(r.params.top_p) for r in new], device=dev)
        self._keys[slots] = seed_keys(torch.tensor([r.seed for r in new], device=dev))
        self._widen_stops(max(len(r.stops) for r in new))
        width = self._stop_ids.shape[1]
        self._stop_ids[slots] = torch.tensor([r.stops + [-1] * (width - len(r.stops)) for r in new], device=dev)

        prompt_lens = [len(r.ids) for r in new]
        longest = max(prompt_lens)
        ids = torch.zeros(m, longest, dtype=torch.long, device=dev)
        for i, r in enumerate(new):
            ids[i, : len(r.ids)] = torch.tensor(r.ids, device=dev)
        lens = torch.tensor(prompt_lens, device=dev)
        zeros = torch.zeros(m, dtype=torch.long, device=dev)
        engine.target_cache.set_lengths(slots, zeros)
        logits, features = engine.target(ids, engine.target_cache, slots, logits_at=(lens - 1)[:, None], tap=self.spec,
                                         max_length=longest)
        budgets = torch.tensor([r.params.max_new_tokens for r in new], device=dev)
        first = sample_accept(logits, torch.empty(m, 0, dtype=torch.long, device=dev), self._temperature[slots],
                              self._top_k[slots], self._top_p[slots], self._keys[slots], lens[:, None],
                              self._stop_ids[slots], budgets)
        engine.target_cache.set_lengths(slots, lens)
        self._last[slots] = first.target_tokens[:, 0]
        if self.spec:
            engine.drafter_cache.set_lengths(slots, zeros)
            self._set_prompt_context(slots, features, lens)
        tokens, done = first.target_tokens[:, 0].tolist(), first.finished.tolist()
        elapsed = time.perf_counter() - t0
        self.prefill_s += elapsed
        events = []  # all bookkeeping first, then the events: a consumer may abort requests between two of them
        for i, r in enumerate(new):
            s = r.slot
            self._active[s] = r
            self._target_len[s], self._drafter_len[s], self._context_len[s] = prompt_lens[i], 0, prompt_lens[i]
            r.stats.prefill_s = elapsed
            r.outputs.append(tokens[i])
            events.append(self._finish(r, [tokens[i]]) if done[i] else StepEvent(r.request_id, [tokens[i]], False))
        yield from events

    def _set_prompt_context(self, slots: torch.Tensor, features: torch.Tensor, lens: torch.Tensor) -> None:
        """A new slot's first drafter context: its prompt's features [m, longest, F], lens[i] of them real; the next
        draft takes them in (a buffer as wide as the longest prompt seen)."""
        longest = features.shape[1]
        if self._context is None or self._context.shape[1] < longest:
            wide = torch.zeros(self.engine.max_batch_size, max(longest, self.k), features.shape[-1],
                               dtype=features.dtype, device=features.device)
            if self._context is not None:
                wide[:, : self._context.shape[1]] = self._context
            self._context = wide
        self._context[slots, :longest] = features
        self._context_counts[slots] = lens

    def _begin_decode(self) -> list[int]:
        """The active slots of this decode (sorted), recorded in the batch-size statistics."""
        active = sorted(self._active)
        self.max_active = max(self.max_active, len(active))
        self.last_batch_size = len(active)
        return active

    def _decode(self) -> Iterator[StepEvent]:
        engine, dev, k = self.engine, self.engine.device, self.k
        t0 = time.perf_counter()
        active = self._begin_decode()
        act = torch.tensor(active, device=dev)
        starts = engine.target_cache.lengths[act]
        last_act = self._last[act]
        if self.spec:
            drafts = torch.empty(len(active), k - 1, dtype=torch.long, device=dev)
            fresh = [row for row, s in enumerate(active) if self._drafter_len[s] == 0]
            running = [row for row, s in enumerate(active) if self._drafter_len[s] > 0]
            for rows in (fresh, running):
                if not rows:
                    continue
                group = [active[r] for r in rows]
                whole = len(rows) == len(active)
                idx = act if whole else torch.tensor(group, device=dev)
                c = max(self._context_len[s] for s in group)
                d_max = max(self._drafter_len[s] + self._context_len[s] for s in group)
                ctx = self._context[idx, :c]
                out = engine._draft(idx, last_act if whole else self._last[idx], starts if whole else starts[rows],
                                    k, ctx, self._context_counts[idx], d_max)
                if whole:
                    drafts = out
                else:
                    drafts[rows] = out
            verify_ids = torch.cat([last_act[:, None], drafts], dim=1)
        else:
            verify_ids, drafts = last_act[:, None], torch.empty(len(active), 0, dtype=torch.long, device=dev)
        t_max = max(self._target_len[s] for s in active) + k
        logits, features = engine.target(verify_ids, engine.target_cache, act, tap=self.spec, max_length=t_max)
        positions = starts[:, None] + 1 + torch.arange(k, device=dev)  # slot j predicts position start + j + 1
        remaining = torch.tensor([self._active[s].params.max_new_tokens - len(self._active[s].outputs) for s in active],
                                 device=dev)
        res = sample_accept(logits, drafts, self._temperature[act], self._top_k[act], self._top_p[act], self._keys[act],
                            positions, self._stop_ids[act], remaining)
        engine.target_cache.set_lengths(act, starts + res.accepted + 1)  # crop: keep last token + accepted drafts
        self._last[act] = res.target_tokens.gather(1, res.accepted[:, None])[:, 0]  # the bonus token
        if self.spec:
            self._context[act, :k] = features  # the verified tokens' features; only the first accepted + 1 count
            self._context_counts[act] = res.accepted + 1
        host = torch.stack([res.accepted, res.num_emitted, res.finished.long()], 1).tolist()
        tokens_host = res.target_tokens.tolist()
        elapsed = time.perf_counter() - t0
        self.decode_s += elapsed
        events = []
        for row, s in enumerate(active):
            req = self._active[s]
            accepted, emitted, done = host[row]
            new = tokens_host[row][:emitted]
            req.outputs.extend(new)
            req.stats.taus.append(accepted + 1)
            req.stats.decode_s += elapsed
            self._target_len[s] += accepted + 1
            self._drafter_len[s] += self._context_len[s]
            self._context_len[s] = accepted + 1
            events.append(self._finish(req, new) if done else StepEvent(req.request_id, new, False))
        yield from events
