"""In-flight (continuous) batching: requests join and leave a slot-based batch at window boundaries. No tensor math here:
the scheduler decides who runs; `SpecStep` (spec/step.py) runs them.

Requests are `add`ed at any time (checked right away by the request layer, exactly as `generate` checks them) and wait
in a FIFO queue. Each `step` admits waiting requests into free slots (lowest first) and prefills them — the new slots
only — then runs one window of `steps_per_sync` speculative steps for every active slot (1: one host read per step; N:
the device loop) and turns what the window produced into events. A request leaves its slot as soon as it finishes
(stop token or budget) or is `abort`ed, and the next waiting request takes it.

The sampling noise is keyed by (seed, absolute position), so a request's tokens do not depend on which other
requests share its steps: greedy or sampled, joining mid-run gives the same output as running alone. That is also
what isolates failures: a prefill or window that raises is re-run one request at a time from each request's prompt
plus the tokens it already emitted (it continues exactly), and only a request that fails alone is failed.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections import deque
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dflash_trt.engines.requests import Request, Result, StepEvent, finish_reason, resolve_draft
from dflash_trt.errors import ConfigError, RequestError
from dflash_trt.spec.budget import Draft, Fixed
from dflash_trt.spec.sampling import SamplingParams
from dflash_trt.spec.stats import Stats
from dflash_trt.spec.step import Launched, SlotRequest

if TYPE_CHECKING:
    from dflash_trt.engines.torch_engine import TorchEngine

_log = logging.getLogger("dflash_trt")


@dataclass(eq=False)
class _Live:
    """A request and what the scheduler knows of it."""

    req: Request
    stats: Stats
    slot: int = -1
    outputs: list[int] = field(default_factory=list)

    @property
    def request_id(self) -> Hashable:
        return self.req.request_id

    def slot_request(self) -> SlotRequest:
        """Its prefill: the prompt, plus the tokens already emitted when it is prefilled again after a failed step
        (the next token is then sampled at the same position with the same key: the output continues exactly)."""
        p = self.req.params
        return SlotRequest(self.slot, self.req.ids + self.outputs, p.temperature, p.top_k, p.top_p, self.req.seed,
                           self.req.stops, p.max_new_tokens, len(self.outputs))


@dataclass(eq=False)
class _Ahead:
    """The next window, launched before the current one's read with its first step only (BatchScheduler._decode)."""

    batch: list[_Live]  # its requests, in its slots' order (a request that ends before its read is skipped then)
    draft: Draft
    launched: "Launched"
    length: int  # its batch's longest cache when launched (at least)


@dataclass(eq=False)
class _Hold:
    """Windows the budget holds a batch at the draft it chose (AutoBudget.hold: the host loop only)."""

    ids: tuple  # its requests (the hold ends when the batch is another)
    draft: Draft
    feeds: bool  # whether its windows feed the drafter
    left: int  # windows it may still hold
    below_length: int | None  # ... while the batch's longest cache is below this (None: any)
    tokens_left: int  # ... and every request has at least this many tokens left
    held: int = 0  # windows held so far
    waiting: list = field(default_factory=list)  # their times and observations, in order: (budget call, arguments)


class BatchScheduler:
    """Step-level API over a TorchEngine: add / step / abort, up to engine.max_batch_size requests at a time.

    The draft budget (`draft` "chain:K" or "auto", or `verify_len` K <= the drafter's block_size: see
    spec/budget.py), use_drafter and steps_per_sync are fixed for the scheduler's life; with "auto" the budget chooses
    K before every window. The engine's caches belong to the latest scheduler made on it: an older one refuses to
    step."""

    def __init__(self, engine: "TorchEngine", *, verify_len: int | None = None, use_drafter: bool = True,
                 steps_per_sync: int | None = None, draft: str | None = None):
        self.engine = engine
        self.runner = engine.step_runner
        self.spec = use_drafter and engine.drafter is not None
        kind, k = resolve_draft(draft, verify_len, engine.drafter.block_size if self.spec else None)
        # plain AR: chain:1 without the drafter
        self.budget = engine.draft_budget(kind, k) if self.spec else Fixed(Draft("chain", 1))
        self.k = k  # the largest K a step verifies (chain: every step's; tree: its nodes; auto: the block)
        self.max_tau = Draft("tree", k).max_tau(engine.drafter.block_size) if kind == "tree" else k  # longest τ
        steps = engine.steps_per_sync if steps_per_sync is None else steps_per_sync
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= self.runner.max_window:
            raise ConfigError(f"steps_per_sync must be an integer in 1..{self.runner.max_window} (the engine's), got "
                              f"{steps!r}")
        self.steps_per_sync = steps
        n = engine.max_batch_size
        self._free: list[int] = list(range(n))  # sorted: the lowest free slot is taken first
        self._waiting: deque[_Live] = deque()
        self._active: dict[int, _Live] = {}  # slot -> request (prefilled)
        self._ids: dict[Hashable, _Live] = {}
        # Requests of a failed prefill / window, each re-run alone (prefill, then one window) to find the one at fault.
        self._suspects: deque[_Live] = deque()
        self._vetting: _Live | None = None
        self.prefill_s = 0.0  # total time spent in prefills / decode windows (what generate reports per run)
        self.decode_s = 0.0
        self.max_active = 0  # the largest number of requests that shared one decode window
        # The last window's (n, draft, longest cache, seconds, when it ended, prefill_s then), while requests remained:
        # its cost as the budget learns it also counts the caller's work until the next window (delivering its
        # events), which an AR window pays per token and a drafted one per several (prefills in between are not the
        # window's).
        self._last_window: tuple | None = None
        # The last window's observations (its requests, draft, τs, tree chain equivalents, which requests finished),
        # which the budget takes in while the device runs the next window (or at once when none follows): on a GPU the
        # bookkeeping is then off the critical path, and choose() finds its estimates ready (measured on an H200,
        # auto's choose + observe after each 4-step window was 0.25-0.45 ms of a ~5 ms window at batch 8-16).
        self._unobserved: tuple | None = None
        # A batch the budget holds at AR for a few windows; their times and observations wait until it ends (_settle)
        self._hold: _Hold | None = None
        # Where the device runs a window while the host waits for it (CUDA), the host works meanwhile: the budget
        # takes every window's observations in (elsewhere every REFRESH_STEPS steps), and the next window's draft is
        # chosen then, for the same batch (AutoBudget.choose_ahead: used if it fits the batch then, else chosen
        # anew). Replayed on traces, taking in every 16 steps loses nothing, but on the H200 (4-step windows) auto's τ
        # fell each time it did: 5.19-5.26 -> 4.88 at batch 8 (session 2), 5.53 / 5.38 -> 5.22 / 5.03 at batch 1 / 8
        # side by side in one run (session 3, auto / best fixed then 0.948 / 0.953 -> 0.926 / 0.905 first uses
        # included), though its host then spends ~270 us of each ~4.5 ms window on it.
        self._overlap = self.spec and self.runner.device.type == "cuda"
        # With CUDA graphs the device never waits for the host between two windows: while a window runs, the next one
        # is launched with its first step (its draft chosen ahead, as above), and the rest of its steps are queued
        # after the current window's read and its events. Its first step is lost work only when every request of it
        # ended in the window before it (then it is dropped, never read): one step, not a window, and only when the
        # window being read is not expected to end them all. On an H200 (fixture pair, batch 1) the host spent
        # ~150-330 us between a window's end on the device and the next one's first kernel, 3-7 % of a 4-step window.
        # Requests joining the batch wait for the window launched ahead (it is read after its first step).
        self._pipeline = self.runner.cuda_graphs
        self._ahead: _Ahead | None = None
        self.runner.forget_in_flight()  # a scheduler before this one may have left a window unread
        self.last_batch_size = 0  # requests in the latest decode window
        engine.cache_owner = self  # the caches are this scheduler's now; an older scheduler refuses to step

    def capture_graphs(self) -> tuple[int, float]:
        """Capture now (CUDA graphs) every step shape this scheduler's windows may run — its budget's drafts at every
        batch bucket, attention length and context width (SpecStep.capture_graphs) — before any request: a server's
        first requests then wait for no capture. Returns (graphs captured, seconds). Needs every slot free."""
        if self._active or self._waiting or self._suspects:
            raise RequestError("capture_graphs runs before any request is added")
        t0 = time.perf_counter()
        count = self.runner.capture_graphs(self.budget.drafts, self.spec)
        if self.spec and Draft("chain", 1) in self.budget.drafts:  # auto's plain AR windows (_feeds_drafter)
            count += self.runner.capture_graphs([Draft("chain", 1)], False)
        return count, time.perf_counter() - t0

    # ---- queries -----------------------------------------------------------------------------------------------------

    @property
    def num_active(self) -> int:
        """Requests holding a slot."""
        return len(self._active)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting) + len(self._suspects)

    @property
    def has_work(self) -> bool:
        return bool(self._active or self._waiting or self._suspects)

    def __contains__(self, request_id: Hashable) -> bool:
        return request_id in self._ids

    def stats_of(self, request_id: Hashable) -> Stats | None:
        """A live request's Stats so far (None if unknown or finished: finished requests carry theirs in the Result)."""
        live = self._ids.get(request_id)
        return live.stats if live is not None else None

    def slot_of(self, request_id: Hashable) -> int | None:
        """The slot a request holds, None while it waits (or if unknown)."""
        live = self._ids.get(request_id)
        return live.slot if live is not None and live.slot >= 0 else None

    # ---- requests ----------------------------------------------------------------------------------------------------

    def add(self, request_id: Hashable, prompt: str | Sequence[int], params: SamplingParams | None = None, *,
            label: str | None = None, field_names: dict[str, str] | None = None) -> None:
        """Queue a request; it is prefilled at the next step that finds a free slot. Raises RequestError (and queues
        nothing) if the request is invalid or the id is already in use. `label` names the request in error messages
        (default: "request <id>"); `field_names` names SamplingParams fields as the caller's API does."""
        if request_id in self._ids:
            raise RequestError(f"request id {request_id!r} is already in use; give each live request its own id")
        req = self.engine.prepare(request_id, prompt, params, label=label or f"request {request_id!r}",
                                  field_names=field_names)
        live = _Live(req, Stats(verify_len=self.max_tau))
        self._ids[request_id] = live
        self._waiting.append(live)

    def abort(self, request_id: Hashable) -> bool:
        """Drop a request (waiting or running) and free its slot. Returns False if the id is unknown/finished."""
        live = self._ids.pop(request_id, None)
        if live is None:
            return False
        self._forget(request_id)
        if live.slot >= 0:
            self._release(live.slot)
        else:
            (self._suspects if live in self._suspects else self._waiting).remove(live)
        if self._vetting is live:
            self._vetting = None
        return True

    def _release(self, slot: int) -> None:
        del self._active[slot]
        bisect.insort(self._free, slot)

    # ---- the step ----------------------------------------------------------------------------------------------------

    def step(self) -> list[StepEvent]:
        """Admit waiting requests into free slots (prefill), then one window of steps for every active slot."""
        return list(self.step_iter())

    def step_iter(self) -> Iterator[StepEvent]:
        """Like step, but yields each event as soon as it exists (prefill events before the window runs).

        A prefill or window that raises fails no request by itself: its requests are put aside and re-run one at a
        time (a prefill from prompt + the tokens they already emitted, then one window, alone); the one that fails
        alone ends with finish_reason "error" and its message, the others continue exactly where they were. Meanwhile
        the rest of the batch waits."""
        if self.engine.cache_owner is not self:
            raise RequestError("this scheduler no longer owns the engine's caches: a later new_scheduler(), generate() "
                               "or stream() on the same engine took them over; use one scheduler per engine at a time")
        if self._suspects or self._vetting is not None:
            yield from self._vet()
            return
        new: list[_Live] = []
        while self._waiting and self._free:
            live = self._waiting.popleft()
            live.slot = self._free.pop(0)
            new.append(live)
        self._drop_ended_ahead()
        if self._ahead is not None and new:  # the window launched ahead ends after its first step, before the prefill
            yield from self._guarded(lambda batch: self._decode(batch, short=True), self._live_of(self._ahead.batch))
        if new:
            yield from self._guarded(self._prefill, new)
        if self._active:
            yield from self._guarded(self._decode, [self._active[s] for s in sorted(self._active)])

    def _drop_ended_ahead(self) -> None:
        """A window launched ahead whose requests have all ended (finished or aborted) is dropped, never read."""
        if self._ahead is not None and not self._live_of(self._ahead.batch):
            self.runner.discard(self._ahead.launched)
            self._ahead = None

    def _live_of(self, batch: list[_Live]) -> list[_Live]:
        """Those of these requests that still hold their slot."""
        return [live for live in batch if self._holds_slot(live)]

    def _holds_slot(self, live: _Live) -> bool:
        return self._active.get(live.slot) is live

    def _guarded(self, run, batch: list[_Live]) -> Iterator[StepEvent]:
        """run(batch) (a prefill or a window, whose events come after all their work), or on an exception: fail the
        request if it ran alone, else put all of them aside to be re-run one by one (`_vet`)."""
        try:
            events = run(batch)
        except Exception as err:  # noqa: BLE001 - any failure: the other requests must survive it
            _log.exception("dflash-trt: a step of %d request(s) failed", len(batch))
            # windows launched and not read: their requests are prefilled again before any step of theirs
            self._ahead = None
            self.runner.forget_in_flight()
            if len(batch) == 1:
                yield self._fail(batch[0], err)
                return
            for live in batch:
                self._unslot(live)
            self._suspects.extend(batch)
            return
        yield from events

    def _vet(self) -> Iterator[StepEvent]:
        """One suspect at a time: its prefill alone, then one window alone; past both it rejoins the batch."""
        if self._vetting is None:
            live = self._suspects.popleft()
            live.slot = self._free.pop(0)
            yield from self._guarded(self._prefill, [live])
            if self._holds_slot(live):
                self._vetting = live
            return
        live, self._vetting = self._vetting, None
        yield from self._guarded(self._decode, [live])

    def _unslot(self, live: _Live) -> None:
        """Give back a request's slot (prefilled or not); its outputs stay with it."""
        if self._holds_slot(live):
            self._release(live.slot)
        elif live.slot >= 0:
            bisect.insort(self._free, live.slot)
        live.slot = -1

    def _result(self, live: _Live, reason: str, error: str | None = None) -> Result:
        live.stats.new_tokens = len(live.outputs)
        return Result(live.outputs, self.engine.detokenize(live.outputs), reason, live.stats, live.req.ids, error)

    def _fail(self, live: _Live, err: BaseException) -> StepEvent:
        self._unslot(live)
        self._ids.pop(live.request_id, None)
        self._forget(live.request_id)
        result = self._result(live, "error", f"generation failed: {type(err).__name__}: {err}")
        return StepEvent(live.request_id, [], True, "error", result)

    def _finish(self, live: _Live, new: list[int]) -> StepEvent:
        reason = finish_reason(live.outputs, live.req.stops)
        self._ids.pop(live.request_id, None)
        self._forget(live.request_id)
        self._release(live.slot)
        return StepEvent(live.request_id, new, True, reason, self._result(live, reason))

    def _forget(self, request_id: Hashable) -> None:
        """The budget forgets a request that ended — after the observations of a hold's windows (AutoBudget.hold),
        which wait for its end, as everything the budget would have been told meanwhile does."""
        if self._hold is not None:
            self._hold.waiting.append((self.budget.forget, (request_id,)))
        else:
            self.budget.forget(request_id)

    def _observe(self, now: bool = False) -> None:
        """The budget takes in the last window's observations (then forgets its requests that have ended since) and
        brings its estimates up to date (AutoBudget.prepare); `now`: everything kept is taken in (no window follows:
        the budget may be dropped with its scheduler). Where the device runs the windows (`_overlap`), a batch's last
        observations wait for the engine's next window instead, run by this scheduler or the next one (`_hand_over`),
        and are taken in first. During a hold (AutoBudget.hold) they wait for its end (`_settle`), unless `now`."""
        untaken, self.engine.untaken_budget = self.engine.untaken_budget, None
        if untaken is not None and untaken is not self.budget:
            untaken.prepare(now=True, tables=False)
        if self._hold is not None and not now:  # a held window's: they wait for the hold's end
            if self._unobserved is not None:
                self._hold.waiting.append((self._hand_in_window, self._unobserved))
                self._unobserved = None
            return
        self._settle()
        self._hand_in()
        self.budget.prepare(now=self._overlap or now, tables=not now)

    def _hand_in(self) -> None:
        """The last window's observations handed to the budget (kept there until it takes them in)."""
        if self._unobserved is not None:
            unobserved, self._unobserved = self._unobserved, None
            self._hand_in_window(*unobserved)

    def _hand_in_window(self, batch: list[_Live], draft: Draft, taus: list, chains: list, finished: list) -> None:
        """One window's observations to the budget; then its requests that have ended since are forgotten."""
        self.budget.observe_window([live.request_id for live in batch], draft, taus, chains, finished)
        for live in batch:
            if self._ids.get(live.request_id) is not live:  # ended (its forget came before its observations)
                self.budget.forget(live.request_id)

    def _held_draft(self, ids: list[Hashable], left: list[int], length: int) -> tuple[Draft, bool] | None:
        """The draft and drafter feed of a window the budget holds (AutoBudget.hold): the same requests as the window
        the hold was chosen for, windows left of it, and within its limits (the batch's longest cache, each request's
        tokens left); else the hold ends here (_settle) and None."""
        hold = self._hold
        if hold is None:
            return None
        if (hold.left > 0 and hold.ids == tuple(ids) and min(left) >= hold.tokens_left
                and (hold.below_length is None or length < hold.below_length)):
            hold.left -= 1
            hold.held += 1
            return hold.draft, hold.feeds
        self._settle()
        return None

    def _settle(self) -> None:
        """A hold's end: its windows' times and observations handed to the budget in order, then their number
        (AutoBudget.held: what choose() would have counted for them)."""
        hold, self._hold = self._hold, None
        if hold is None:
            return
        for call, args in hold.waiting:
            call(*args)
        self.budget.held(hold.held)

    def _hand_over(self) -> None:
        """A batch's last window, on a device that runs the windows: its observations stay with the budget, which the
        engine's next window takes in while the device runs it (taken in now, ~0.3 ms of numpy after each batch on an
        H200's host, they delayed the next prefill: at batch 1 one request in ~6 windows)."""
        self._hand_in()
        self.engine.untaken_budget = self.budget

    def _prefill(self, new: list[_Live]) -> list[StepEvent]:
        t0 = time.perf_counter()
        # requests joining a batch the budget would hold at AR: the drafter takes their prompt in if it ever drafts
        joined = list(self._active.values()) + new
        defer = self.spec and self.budget.defers_context(len(joined), _longest_cache(joined))
        tokens, done = self.runner.prefill([live.slot_request() for live in new], self.spec, defer)
        elapsed = time.perf_counter() - t0
        self.prefill_s += elapsed
        for live, token in zip(new, tokens):  # all bookkeeping first: a consumer may abort requests between events
            self._active[live.slot] = live
            live.stats.prefill_s += elapsed
            live.outputs.append(token)
        return [self._finish(live, [token]) if d else StepEvent(live.request_id, [token], False)
                for live, token, d in zip(new, tokens, done)]

    def _decode(self, batch: list[_Live], short: bool = False) -> list[StepEvent]:
        """One window for the batch: the one launched ahead (its requests, less those that ended since: the batch is
        among them), else one launched now; the next one launched ahead meanwhile where the pipeline runs. `short`:
        the window launched ahead ends with the steps it has run (requests are about to join)."""
        t0 = time.perf_counter()
        if self._last_window is not None:
            n, draft, length, seconds, ended, prefill_s = self._last_window
            between = t0 - ended - (self.prefill_s - prefill_s)
            timing = (n, draft, (seconds + min(max(between, 0.0), seconds)) / self.steps_per_sync, length)
            if self._hold is not None:
                self._hold.waiting.append((self.budget.observe_time, timing))
            else:
                self.budget.observe_time(*timing)
            self._last_window = None
        slots = [live.slot for live in batch]
        self.max_active = max(self.max_active, len(slots))
        self.last_batch_size = len(slots)
        ids = [live.request_id for live in batch]
        left = [live.req.params.max_new_tokens - len(live.outputs) for live in batch]
        length = _longest_cache(batch)  # what the window's attention reads: the cost depends on it
        ahead, self._ahead = self._ahead, None
        if ahead is not None:  # launched with its first step while the window before it ran
            window, draft, launched, start = ahead.batch, ahead.draft, ahead.launched, ahead.length
            self.runner.resume(launched, launched.ran if short else None)
        else:
            window, start = batch, length
            held = self._held_draft(ids, left, length)
            if held is not None:
                draft, feeds = held
            else:
                draft = self.budget.choose(ids, left, length)
                feeds = self._feeds_drafter(draft)
                if not (self._overlap or self._pipeline):  # (the device loop chooses ahead instead)
                    windows = self.budget.hold(self.steps_per_sync, left, length)
                    if windows > 0:
                        self._hold = _Hold(tuple(ids), draft, feeds, windows, *self.budget.hold_limits)
            launched = self.runner.launch(slots, draft.size, feeds, self.steps_per_sync, free=self._free,
                                          tree=draft.tree)
        self._observe()  # the previous window's, while this one runs
        steps, after = self.steps_per_sync, length + self.steps_per_sync  # after this window: at least that long
        if self._overlap or (self._pipeline and not short):  # the next window's draft, for this batch after this one
            ahead_draft = self.budget.choose_ahead(ids, left, after, steps)
            # not while requests wait to be re-run alone: their prefills come next (none may precede a window's read)
            if (self._pipeline and not short and not self._suspects and not self._all_ending(batch, left)
                    and self.runner.ahead_ok(slots, ahead_draft.size, self.spec, ahead_draft.tree, steps)):
                ahead_draft = self.budget.commit_ahead()
                self._ahead = _Ahead(batch, ahead_draft, self.runner.launch(
                    slots, ahead_draft.size, self._feeds_drafter(ahead_draft), steps, free=self._free,
                    tree=ahead_draft.tree, run=1), after)
        out = self.runner.read(launched)
        elapsed = time.perf_counter() - t0
        self.decode_s += elapsed
        # the window's requests that still hold their slot (one launched ahead may hold requests that ended since)
        kept = [i for i, live in enumerate(window) if self._holds_slot(live)]
        chains = out.chain_equivalent
        for i in kept:
            live, taus = window[i], out.taus[i]
            live.outputs.extend(out.new_tokens[i])
            live.stats.taus.extend(taus)
            live.stats.ks.extend([draft.size] * len(taus))
            live.stats.count_draft(str(draft), len(taus))
            live.stats.decode_s += elapsed
        self._unobserved = ([window[i] for i in kept], draft, [out.taus[i] for i in kept],
                            [chains[i] for i in kept] if chains else [], [out.done[i] for i in kept])
        events = [self._finish(window[i], out.new_tokens[i]) if out.done[i]
                  else StepEvent(window[i].request_id, out.new_tokens[i], False) for i in kept]
        if not self._active:  # no window follows to hide it behind
            self._drop_ended_ahead()  # its requests all ended in this window
            if self._overlap:
                self._hand_over()
            else:
                self._observe(now=True)
        # a window that compiled or captured a graph: its time says nothing of what its steps cost; nor does one
        # ended early (its first step ran while the host was elsewhere)
        if out.warmup or short:
            pass
        elif self._active:  # the next window follows as soon as the caller has taken these events
            self._last_window = (len(window), draft, start, elapsed, time.perf_counter(), self.prefill_s)
        else:  # the batch is done: whatever the caller does next is not this window's cost
            self.budget.observe_time(len(window), draft, elapsed / self.steps_per_sync, start)
        return events

    def _feeds_drafter(self, draft: Draft) -> bool:
        """Whether the window of the draft just chosen runs the drafter or feeds its context: every drafting window,
        and an AR one unless the budget says no drafting window is near (AutoBudget.needs_context): then it is a plain
        AR step, what an engine without a drafter runs."""
        return self.spec and (draft.size > 1 or self.budget.needs_context(self.steps_per_sync))  # (trees: 2+ nodes)

    def _all_ending(self, batch: list[_Live], left: list[int]) -> bool:
        """Whether every request is expected to end in the window running now (its tokens left at most its last
        window's mean τ times the steps): then a window launched ahead would likely be dropped."""
        for live, n in zip(batch, left):
            recent = live.stats.taus[-self.steps_per_sync:]
            if n > self.steps_per_sync * (sum(recent) / len(recent) if recent else 1):
                return False
        return True


def _longest_cache(batch: list[_Live]) -> int:
    """The longest target cache among these requests (their tokens but the last, which the next step verifies; a
    request not prefilled yet counts its prompt): a step's attention reads that many positions per row."""
    return max(len(live.req.ids) + len(live.outputs) for live in batch) - 1
