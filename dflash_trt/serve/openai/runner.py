"""The engine thread of the OpenAI server: one thread owns the engine and one BatchScheduler.

Request handlers (asyncio) `submit` a group of choices (one HTTP request: n choices of each of its prompts, each its
own scheduler request) through a thread-safe queue, with a `sink` that hands updates back to their event loop
(`loop.call_soon_threadsafe`). The thread sleeps on the queue while there is nothing to run (no busy spin). At every
step boundary it takes everything queued: new groups are checked and queued in the scheduler (`scheduler.add`, the
engine's request layer: a RequestError rejects that group only, with one message), aborts drop their requests and
free their slots. Then one `step_iter()` for the whole batch; each event's tokens are decoded (the whole output so
far, so multi-byte characters come out whole), checked for stop strings (a hit cuts the text, ends the choice with
finish_reason "stop" and aborts it in the scheduler) and sent to the handler as an `Update`: the new visible text
when streaming, the whole text when the choice finishes.

All tokenizer work (encoding prompts, decoding outputs) happens on this thread: HF tokenizers are not safe to share
between threads that use them at the same time.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from dflash_trt.engines.requests import encode_prompt
from dflash_trt.errors import DFlashError, RequestError
from dflash_trt.serve.openai.text import TextStream, visible_text
from dflash_trt.serve.queueing import take_queued
from dflash_trt.spec.sampling import SamplingParams
from dflash_trt.spec.stats import Stats

_log = logging.getLogger("dflash_trt.serve.openai")
_STOP = object()


@dataclass
class Choice:
    """One generation of a request: its prompt (text or token ids), params and stop strings.
    params.max_new_tokens None: the room the prompt leaves within the engine's max_seq_len."""

    prompt: str | list[int]
    params: SamplingParams
    stop: list[str] = field(default_factory=list)


@dataclass
class Admitted:
    """Every choice of the group was accepted; prompt_tokens[i] = choice i's prompt length."""

    prompt_tokens: list[int]


@dataclass
class Rejected:
    """The group was refused (nothing runs): the request layer's message."""

    message: str


@dataclass
class Update:
    """New output of choice `index`: streaming, the text that became visible; on the last update (finished) of a
    non-streamed choice, its whole text. finish_reason "stop" / "length" / "error" (then `error`)."""

    index: int
    text: str
    finished: bool = False
    finish_reason: str | None = None
    completion_tokens: int = 0
    stats: Stats | None = None
    error: str | None = None


Sink = Callable[[object], None]


@dataclass(eq=False)
class _Live:
    gid: int
    index: int
    sink: Sink
    stream: bool
    stops: list[str]
    text: TextStream
    admitted_at: float
    token_ids: list[int] = field(default_factory=list)
    taus_seen: int = 0
    drafts_seen: dict = field(default_factory=dict)  # its steps by draft counted into the metrics so far


class EngineRunner:
    """Owns `engine` and its BatchScheduler on a thread of its own (start / stop); submit / abort from any thread."""

    def __init__(self, engine, *, verify_len: int | None = None, use_drafter: bool = True,
                 steps_per_sync: int | None = None, metrics=None, draft: str | None = None):
        self.engine = engine
        self._scheduler_args = dict(verify_len=verify_len, use_drafter=use_drafter, steps_per_sync=steps_per_sync,
                                    draft=draft)
        self.scheduler = engine.new_scheduler(**self._scheduler_args)
        graphs, seconds = self.scheduler.capture_graphs()  # before any request: none waits for a capture
        if graphs:
            _log.info("dflash-trt: captured %d CUDA graphs (step shapes) in %.1f s", graphs, seconds)
        self.k = self.scheduler.k  # 1 = plain AR
        self.metrics = metrics
        self._queue: queue.Queue = queue.Queue()
        self._gids = itertools.count()
        self._live: dict[Hashable, _Live] = {}
        self._groups: dict[int, list[Hashable]] = {}
        self.running = 0  # requests holding a slot / waiting for one (as of the last step boundary)
        self.waiting = 0
        self.failure: str | None = None  # set if the thread died (then /health says so)
        self._thread: threading.Thread | None = None

    # ---- any thread ----------------------------------------------------------------------------------------------

    def set_metrics(self, metrics) -> None:
        """Report into `metrics` (serve.openai.metrics.Metrics), its gauges set now (the graphs captured at start)."""
        self.metrics = metrics
        self._gauges()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="dflash-openai-engine", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish: every live request ends with an error ("the server is shutting down"), then the thread exits."""
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, choices: list[Choice], *, stream: bool, sink: Sink, label: str = "prompt",
               field_names: dict[str, str] | None = None) -> int:
        """Queue a group of choices; returns its id. The sink gets Admitted or Rejected first, then Updates."""
        gid = next(self._gids)
        self._queue.put(("submit", gid, choices, stream, sink, label, field_names))
        return gid

    def abort(self, gid: int) -> None:
        """Drop a group's choices that are still running (the client went away); frees their slots."""
        self._queue.put(("abort", gid))

    # ---- the engine thread ---------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as err:  # noqa: BLE001 - the server must say it cannot serve any more
            self.failure = f"{type(err).__name__}: {err}"
            _log.exception("dflash-trt: the engine thread failed")
            self._end_all("error", f"the engine thread failed: {self.failure}")

    def _loop(self) -> None:
        while True:  # everything that arrived since the last step joins now
            items = take_queued(self._queue, wait=not self.scheduler.has_work)
            for item in items:
                if item is _STOP:
                    self._end_all("abort", "the server is shutting down")
                    return
                if item[0] == "submit":
                    self._admit(*item[1:])
                else:
                    self._abort_group(item[1])
            self._gauges()
            if not self.scheduler.has_work:
                continue
            try:
                # Events go out as they exist: new requests' first tokens before the decode window runs (TTFT).
                for event in self.scheduler.step_iter():
                    self._on_event(event)
            except Exception as err:  # noqa: BLE001 - not one request's failure (the scheduler isolates those)
                _log.exception("dflash-trt: a step failed")
                self._end_all("error", f"generation failed: {type(err).__name__}: {err}")
                self.scheduler = self.engine.new_scheduler(**self._scheduler_args)
            self._gauges()

    def _gauges(self) -> None:
        self.running, self.waiting = self.scheduler.num_active, self.scheduler.num_waiting
        if self.metrics is not None:
            self.metrics.running.set(self.running)
            self.metrics.waiting.set(self.waiting)
            step = self.engine.step_runner
            self.metrics.graphs.set(len(step.graphs))
            self.metrics.first_use.set(step.capture_s)

    def _send(self, sink: Sink, message: object, gid: int | None = None) -> None:
        try:
            sink(message)
        except Exception as err:  # noqa: BLE001 - its event loop is gone: nobody will read this group's output
            _log.warning("dflash-trt: request group %s: cannot deliver (%s); aborting it", gid, err)
            if gid is not None:
                self._abort_group(gid)

    def _admit(self, gid: int, choices: list[Choice], stream: bool, sink: Sink, label: str,
               names: dict[str, str] | None) -> None:
        rids: list[Hashable] = []
        prompt_tokens: list[int] = []
        encoded: dict[int, list[int]] = {}  # the n choices of one prompt share its object: tokenize it once
        try:
            for i, choice in enumerate(choices):
                key = id(choice.prompt)
                if key not in encoded:
                    encoded[key] = encode_prompt(choice.prompt, self.engine.tokenizer,
                                                 self.engine.target.cfg.vocab_size)
                ids = encoded[key]
                params = choice.params
                if params.max_new_tokens is None:  # no budget given: what the prompt leaves of max_seq_len
                    room = self.engine.max_seq_len - len(ids)
                    if room < 1:
                        raise RequestError(f"{label}: {len(ids)} prompt tokens leave no room for a new token within "
                                           f"max_seq_len {self.engine.max_seq_len}; shorten the prompt")
                    params = dataclasses.replace(params, max_new_tokens=room)
                rid = (gid, i)
                self.scheduler.add(rid, ids, params, label=label, field_names=names)
                rids.append(rid)
                prompt_tokens.append(len(ids))
        except DFlashError as err:
            for rid in rids:
                self.scheduler.abort(rid)
            self._send(sink, Rejected(str(err)))
            return
        now = time.perf_counter()
        for rid, choice in zip(rids, choices):
            self._live[rid] = _Live(gid, rid[1], sink, stream, list(choice.stop), TextStream(choice.stop), now)
        self._groups[gid] = rids
        if self.metrics is not None:
            self.metrics.prompt_tokens.inc(sum(prompt_tokens))
        self._send(sink, Admitted(prompt_tokens), gid)

    def _abort_group(self, gid: int) -> None:
        for rid in self._groups.pop(gid, []):
            if self._live.pop(rid, None) is not None:
                self.scheduler.abort(rid)
                if self.metrics is not None:
                    self.metrics.requests.labels("abort").inc()

    def _end_all(self, reason: str, message: str) -> None:
        for rid, live in list(self._live.items()):
            try:
                self.scheduler.abort(rid)
            except Exception:  # noqa: BLE001
                pass
            self._end(rid, live, Update(live.index, "", True, "error", len(live.token_ids), None, message), reason)

    def _end(self, rid: Hashable, live: _Live, update: Update, reason: str | None = None) -> None:
        self._live.pop(rid, None)
        group = self._groups.get(live.gid)
        if group is not None and not any(r in self._live for r in group):
            del self._groups[live.gid]
        if self.metrics is not None:
            self.metrics.requests.labels(reason or update.finish_reason).inc()
        self._send(live.sink, update, live.gid)

    def _on_event(self, event) -> None:
        rid = event.index
        live = self._live.get(rid)
        if live is None:  # aborted meanwhile
            return
        result = event.result
        if event.finish_reason == "error":  # this request failed alone; the others go on
            self._end(rid, live, Update(live.index, "", True, "error", len(live.token_ids), result.stats, result.error))
            return
        m = self.metrics
        if m is not None:
            if not live.token_ids and event.token_ids:
                m.ttft.observe(time.perf_counter() - live.admitted_at)
            m.generation_tokens.inc(len(event.token_ids))
        live.token_ids.extend(event.token_ids)
        stats = result.stats if result is not None else self.scheduler.stats_of(rid)
        if stats is not None and m is not None and len(stats.taus) > live.taus_seen:
            m.observe_taus(stats.taus[live.taus_seen:])
            live.taus_seen = len(stats.taus)
            m.observe_drafts(stats.draft_steps, live.drafts_seen)
        finish = event.finish_reason
        if not (live.stream or live.stops or event.finished):
            return  # nothing to decode until it finishes
        text = self.engine.detokenize(live.token_ids) or ""
        if live.stream:
            out, stopped = live.text.update(text, event.finished)
        else:
            out, stopped = visible_text(text, live.stops, event.finished)
        if stopped:
            finish = "stop"
            if not event.finished:
                self.scheduler.abort(rid)  # frees its slot now
        if finish is None:
            if out:
                self._send(live.sink, Update(live.index, out), live.gid)
            return
        self._end(rid, live, Update(live.index, out, True, finish, len(live.token_ids), stats))
