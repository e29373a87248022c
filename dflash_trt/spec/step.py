"""The speculative step, once: prefill and draft -> verify -> accept -> bookkeeping for any set of slots, run as a
window of N steps with one host read at its end (N = 1: the host-synchronised loop; N > 1: the device loop).

`SpecStep` owns the target's and the drafter's KV caches and every per-slot input and output of a step, in buffers
allocated once for `max_batch_size` slots:

    per slot   last verified token, drafter context (B + DEFERRED_CONTEXT rows of the target's tap features) + count +
               the first drafter cache position that is context, sampling state
               (temperature, top_k, top_p, key), stop ids (MAX_STOP_IDS wide, -1 padded), token budget, tokens
               produced, done flag, output tokens [max_seq_len (+ a dump area)], the window's τ log
    prefill    the prompt (or prompt + tokens already emitted) into the target cache, the first token sampled, and the
               prompt's tap features taken straight into the drafter cache (`DFlashDrafter.ingest`), so a decode step
               carries no more than the last step's τ context rows — or, for requests joining a batch auto holds at
               AR (defer_context), only the prompt's last rows, pending, as AR steps leave theirs (see window)
    one step   prepare_block -> drafter -> drafts_to_verify -> target verify -> sample_accept -> append the emitted
               tokens to the slot's output row -> commit_step (crop both caches, next context, bonus token)

The four per-step ops come from one ops table (`kernels.ops`: the CUDA kernels where the plugin library runs, the
torch references otherwise). A step reads and writes only these buffers and the caches, never the host, so a window
of steps needs no synchronisation and each step is capturable. On CUDA with `cuda_graphs`, the batch is padded to a
bucket of slots and attention runs over a length bucket, and each (K, bucket, length) step is captured once, in the
step's graph cache, and replayed; elsewhere a step runs eagerly over exactly the given slots and their live length.
Rows that finish inside a window (a stop token, the budget) are frozen on the device: they emit nothing more and their
caches do not advance. A window (`launch`, then `read`) ends with one host read of everything the scheduler needs.
With `compile`, the step runs through torch.compile: it reads nothing off the device (the window's SamplingModes come
from the host), so it traces as one graph (README "torch.compile").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from dflash_trt.errors import ConfigError
from dflash_trt.kernels.ops import StepOps, ops_for, traceable
from dflash_trt.models.kv_cache import slot_span
from dflash_trt.spec.budget import Draft, powers_of_two_to
from dflash_trt.spec.sampling import GREEDY, SamplingModes, seed_keys
from dflash_trt.spec.tree import (MAX_TREE_NODES, DraftTree, build_tree, chain_equivalent, max_depth,
                                  tree_candidates)

MAX_STOP_IDS = 32  # stop ids per request (EOS included): the per-slot stop buffer's width
DEFERRED_CONTEXT = 112  # context rows a slot may hold beyond a block: AR steps of a drafting engine (K = 1) append
#                         their tap features there instead of running the drafter, which takes them in when it next
#                         drafts; a slot whose rows are full keeps the newest half (SpecStep.launch); a plain AR
#                         window (launch with spec False: a held batch far from its probe) appends none (_retap)
MIN_LENGTH_BUCKET = 64
COST_LENGTHS = (128, 512)  # cache lengths the draft budget's cost table is timed at (SpecStep.measure_costs)
SETTLED = 0.1  # a cost entry's two fastest timings within this of each other: settled (SpecStep.measure_costs)


def deferring_step(k: int, spec: bool, tree: bool) -> bool:
    """Whether a step appends its context rows instead of running the drafter: an AR step (K = 1, no tree) of a
    window that feeds the drafter (DEFERRED_CONTEXT)."""
    return spec and k == 1 and not tree


def bucket_sizes(max_batch_size: int) -> list[int]:
    """Batch buckets (CUDA graphs): powers of two below max_batch_size, and max_batch_size."""
    return powers_of_two_to(max_batch_size)


def length_bucket(length: int, capacity: int) -> int:
    """The attention length a captured step runs with: the next power of two >= length (at least 64), <= capacity."""
    b = MIN_LENGTH_BUCKET
    while b < length:
        b *= 2
    return min(b, capacity)


def cache_headroom(target, drafter) -> int:
    """Positions each slot's caches keep past max_seq_len: a verify block (or a draft tree, verified at consecutive
    positions before its accepted path is compacted: targets with `tree_verify`) and prefill padding write entries
    past the kept length."""
    if drafter is None:
        return 1
    return max(drafter.block_size, MAX_TREE_NODES if getattr(target, "tree_verify", False) else 0)


@dataclass
class SlotRequest:
    """What a prefill needs of one request."""

    slot: int
    token_ids: list[int]  # what goes into the cache: the prompt (+ tokens already emitted, after a failed step)
    temperature: float
    top_k: int
    top_p: float
    seed: int
    stops: list[int]
    budget: int  # max_new_tokens
    produced: int = 0  # tokens the request already emitted (> 0 only when it is prefilled again)


@dataclass
class Launched:
    """A window queued on the device (SpecStep.launch), until its host read (SpecStep.read): what its steps need to
    run (a window launched ahead runs its first steps before the previous window's read, the rest at `resume`), and
    the read's tensor once all are queued."""

    slots: list[int]
    k: int  # what each step verifies: a chain's K, a tree's nodes
    steps: int  # the steps it runs (a window finished early: fewer than planned)
    tree: bool
    defer: bool  # its K = 1 steps appended their context rows
    packed: torch.Tensor | None  # the read's tensor (see launch); None until every step is queued
    warmup: bool
    ran: int = 0  # steps queued so far
    growth: int = 0  # the most any slot's target cache may grow over the window (steps x longest τ): a bound until read
    max_tau: int = 1  # the longest τ a step of it can have: a bound on a slot's pending context rows after it
    run: tuple = ()  # (rows, k, spec, upto, frozen, key, the step's window state, start_produced, graphs made before)
    ready: object = None  # CUDA: the event after the read tensor's copy to the host (read() waits for it alone)
    host: torch.Tensor | None = None  # ... that copy (pinned host memory)
    spec: bool = True  # it ran or fed the drafter (False: plain AR, with or without a drafter: no context rows)


@dataclass
class WindowResult:
    """What the host learns after a window, per slot in the order given."""

    new_tokens: list[list[int]]
    taus: list[list[int]]  # τ of each step the slot took part in (accepted + 1)
    done: list[bool]
    # tree windows: per step, (K, τ) of the tree's argmax chain — the chain a chain draft would have verified, as deep
    # as the step verified it, and what it accepted + 1 (spec/tree.chain_equivalent); empty for chains
    chain_equivalent: list[list[tuple[int, int]]] = field(default_factory=list)
    # the window compiled a graph (torch.compile) or captured one (CUDA graphs): its time is not what its steps cost
    warmup: bool = False


class SpecStep:
    def __init__(self, target, drafter, *, max_batch_size: int, max_seq_len: int, max_window: int = 1,
                 ops: StepOps | None = None, cuda_graphs: bool = False, compile: bool = False):
        self.target, self.drafter = target, drafter
        dev = target.lm_head.weight.device
        self.device = dev
        n = max_batch_size
        self.max_batch_size, self.max_seq_len, self.max_window = n, max_seq_len, max_window
        self.block_size = drafter.block_size if drafter is not None else 1  # the largest K
        # Draft trees: targets that verify them (`tree_verify`: all but hybrid ones), up to MAX_TREE_NODES nodes.
        self.max_tree_nodes = MAX_TREE_NODES if drafter is not None and getattr(target, "tree_verify", False) else 0
        capacity = max_seq_len + cache_headroom(target, drafter)
        self.target_cache = target.new_cache(n, capacity)
        self.drafter_cache = drafter.new_cache(n, capacity) if drafter is not None else None
        if drafter is not None:
            target.tap_layer_ids = list(drafter.cfg.target_layer_ids)
        dtype = target.lm_head.weight.dtype
        for model in (target, drafter) if drafter is not None else (target,):
            model.rotary.precompute(capacity + self.block_size, dtype)  # block positions reach past the cache
        self.ops = ops or ops_for(dev)
        self.cuda_graphs = bool(cuda_graphs) and dev.type == "cuda"
        long = dict(dtype=torch.long, device=dev)
        self.last = torch.zeros(n, **long)
        self.temperature = torch.zeros(n, device=dev)
        self.top_k = torch.zeros(n, **long)
        self.top_p = torch.ones(n, device=dev)
        self.keys = torch.zeros(n, **long)
        self.stop_ids = torch.full((n, MAX_STOP_IDS), -1, **long)
        self.budget = torch.zeros(n, **long)
        self.produced = torch.zeros(n, **long)
        self.done = torch.ones(n, dtype=torch.bool, device=dev)
        self.out = torch.zeros(n, max_seq_len + self.block_size, **long)  # the last block_size columns: a dump area
        self.tau_log = torch.zeros(max_window, n, **long)
        self.chain_log = torch.zeros(max_window, n, 2, **long)  # tree steps: (K, τ) of the argmax chain
        self.step_index = torch.zeros((), **long)
        self.context_counts = torch.zeros(n, **long)
        self.context_rows = self.block_size + DEFERRED_CONTEXT
        self.context_kept = self.context_rows // 2  # rows a slot keeps when its pending rows are full
        room = self.context_rows - self.context_kept
        if drafter is not None and max_window > room:  # an AR window's rows must fit after keeping the newest half
            raise ConfigError(f"steps_per_sync {max_window} is more steps than a window may take with this drafter "
                              f"(its context rows have room for {room} AR steps): use --steps-per-sync {room} or less")
        self.context_from = torch.zeros(n, **long)  # per slot: the first drafter cache position that is context
        self.context = (torch.zeros(n, self.context_rows, drafter.fc.in_features, dtype=target.lm_head.weight.dtype,
                                    device=dev) if drafter is not None else None)
        self.host_lengths = [0] * n  # target cache lengths as of the last host read: sizes attention without a sync
        self.host_context = [0] * n  # drafter context rows pending per slot (= the last step's τ), as of that read
        # slots whose last window was a plain AR one (launch with spec False on a drafting engine: no taps, no context
        # rows): their drafter state lags the target's; the next window that feeds the drafter restarts its context
        # there (_retap)
        self._untapped: set[int] = set()
        self.buckets = bucket_sizes(n)
        self._rows = {b: torch.zeros(b, **long) for b in self.buckets}
        self.graphs: dict[tuple, torch.cuda.CUDAGraph] = {}  # _graph_key -> captured step
        self._pool = None
        # the cost table's captured steps (measure_costs), in a memory pool of their own, freed with them (a pool
        # whose graphs are all gone cannot take another capture: the windows' graphs must not share it)
        self._timing_graphs: dict[tuple, torch.cuda.CUDAGraph] = {}
        self._timing_pool = None
        self.graph_replays = 0  # steps run by replaying a captured graph
        self.capture_s = 0.0  # seconds windows spent on first uses of a shape: its eager run and its capture
        self._captured = False  # the current window captured a CUDA graph
        self._host_rows: list[int] | None = None  # the window's slots on the host (eager steps only)
        self._context_width = self.block_size
        self._defer = False  # the window's K = 1 steps append their context instead of running the drafter
        self.host_sampling = [(0.0, 0, 1.0)] * n  # per slot (temperature, top_k, top_p), as the host set them
        self._modes = GREEDY  # the window's SamplingModes: the step reads no sampling flag off the device
        self._row_start = -1  # compiled steps: the first row the window's slots are read from (-1: gathered)
        self._span: tuple[int, torch.Tensor] | None = None  # ... and, slots with holes: (span width, their rows in it)
        self._in_flight: list[Launched] = []  # windows launched, not read yet (oldest first): see launch's `run`
        self._tree_cands: dict[int, tuple] = {}  # N -> build_tree's candidates for N nodes: see _tree_candidates
        # torch.compile'd step (optional): traced per (K, chain or tree, frozen, deferred, sampling modes) on first use,
        # lengths and batch sizes dynamic after their first change (batch 1 is a graph of its own), so a run compiles
        # a few graphs per draft once per process (Inductor's on-disk cache makes later processes faster). Prefill
        # stays eager. The K/V compaction of trees goes through its custom op (kernels.ops.traceable).
        self.compiled = bool(compile)
        self._step_fn = self._step
        if self.compiled:
            self.ops = traceable(self.ops)
            # every (K, frozen, deferred, sampling modes, ...) variant is a recompile of the one step function; this
            # engine's graphs are its own (isolate_recompiles: another engine's are not among the guards checked)
            try:
                self._step_fn = torch.compile(self._step, recompile_limit=64, isolate_recompiles=True)
            except TypeError:  # torch < 2.12 takes neither per function: raise the process-wide limit instead
                torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
                self._step_fn = torch.compile(self._step)

    # ---- prefill -----------------------------------------------------------------------------------------------------

    @torch.inference_mode()
    def prefill(self, reqs: list[SlotRequest], spec: bool, defer_context: bool = False) -> tuple[list[int], list[bool]]:
        """The requests' token ids into their (fresh) slots; returns each one's first token and whether that token
        finished it (a stop id, or a budget of one). With spec, the prompt's tap features go into the drafter cache —
        or, with defer_context (requests joining a batch that auto holds at AR), only the prompt's last context_kept
        rows, pending: the drafter takes them in when it next drafts (if ever), and sees no context before them."""
        if self._in_flight:  # a window launched ahead would run its later steps on a slot prefilled meanwhile
            raise RuntimeError("prefill while a launched window is unread: read it (or discard it) first")
        dev, m = self.device, len(reqs)
        self._untapped.difference_update(r.slot for r in reqs)
        slots = torch.tensor([r.slot for r in reqs], device=dev)
        self.temperature[slots] = torch.tensor([float(r.temperature) for r in reqs], device=dev)
        self.top_k[slots] = torch.tensor([r.top_k for r in reqs], device=dev)
        self.top_p[slots] = torch.tensor([float(r.top_p) for r in reqs], device=dev)
        self.keys[slots] = seed_keys(torch.tensor([r.seed for r in reqs], device=dev))
        self.stop_ids[slots] = torch.tensor([r.stops + [-1] * (MAX_STOP_IDS - len(r.stops)) for r in reqs], device=dev)
        for r in reqs:
            self.host_sampling[r.slot] = (float(r.temperature), int(r.top_k), float(r.top_p))
        lens = [len(r.token_ids) for r in reqs]
        longest = max(lens)
        ids = torch.zeros(m, longest, dtype=torch.long, device=dev)
        for i, r in enumerate(reqs):
            ids[i, : lens[i]] = torch.tensor(r.token_ids, device=dev)
        lengths = torch.tensor(lens, device=dev)
        zeros = torch.zeros(m, dtype=torch.long, device=dev)
        self.target_cache.set_lengths(slots, zeros)
        logits, features = self.target(ids, self.target_cache, slots, logits_at=(lengths - 1)[:, None], tap=spec,
                                       max_length=longest, host_slots=[r.slot for r in reqs], fresh=True)
        remaining = torch.tensor([r.budget - r.produced for r in reqs], device=dev)
        first = self.ops.sample_accept(logits, torch.empty(m, 0, dtype=torch.long, device=dev), self.temperature[slots],
                                       self.top_k[slots], self.top_p[slots], self.keys[slots], lengths[:, None],
                                       self.stop_ids[slots], remaining,
                                       modes=self.sampling_modes([r.slot for r in reqs]))
        self.target_cache.set_lengths(slots, lengths)
        token = first.target_tokens[:, 0]
        self.last[slots] = token
        produced = torch.tensor([r.produced + 1 for r in reqs], device=dev)
        self.budget[slots] = torch.tensor([r.budget for r in reqs], device=dev)
        self.produced[slots] = produced
        self.out[slots, produced - 1] = token
        self.done[slots] = first.finished
        pending = [0] * m
        if spec and defer_context:
            pending = [min(n, self.context_kept) for n in lens]
            for i, (r, n, keep) in enumerate(zip(reqs, lens, pending)):
                self.context[r.slot, :keep] = features[i, n - keep: n].to(self.context.dtype)
            keeps = torch.tensor(pending, device=dev)
            self.drafter_cache.set_lengths(slots, lengths - keeps)
            self.context_from[slots] = lengths - keeps
            self.context_counts[slots] = keeps
        elif spec:
            cache = self.drafter_cache
            cache.set_lengths(slots, zeros)
            self.drafter.ingest(features, lengths, cache, slots)
            cache.set_lengths(slots, lengths)
            self.context_counts[slots] = 0
            self.context_from[slots] = 0
        for r, n, rows in zip(reqs, lens, pending):
            self.host_lengths[r.slot], self.host_context[r.slot] = n, rows
        host = torch.stack([token, first.finished.long()], 1).tolist()
        return [t for t, _ in host], [bool(d) for _, d in host]

    # ---- the window --------------------------------------------------------------------------------------------------

    @torch.inference_mode()
    def launch(self, slots: list[int], k: int, spec: bool, steps: int, free: list[int] = (),
               tree: bool = False, run: int | None = None) -> "Launched":
        """A window: `steps` speculative steps (verifying k slots each; k = 1 and spec False: plain AR; tree: a draft
        tree of k nodes each) for the given slots, which must be live (prefilled, not finished), queued on the device
        (run, where the device is the CPU), and its one host read's tensor; read() waits for them. With CUDA graphs the
        batch is padded with `free` slots (marked done, emptied: they emit nothing). Between launch and read the host
        is free (a scheduler does its bookkeeping there), but must not touch the slots.

        `run` < steps queues only the first `run` steps (`resume` queues the rest, or finishes the window early): a
        window launched ahead, before the read of the window queued before it (on the same slots, or fewer), so the
        device goes on with its first step while the host reads the previous window and delivers it. Its attention
        length and context width then come from bounds on what the unread windows may leave (`ahead_ok`)."""
        if not 1 <= steps <= self.max_window:
            raise ValueError(f"steps must be in 1..{self.max_window}, got {steps}")
        if tree and not (spec and 2 <= k <= self.max_tree_nodes):
            raise ValueError(f"a draft tree needs the drafter and 2..{self.max_tree_nodes} nodes (0: this target "
                             f"cannot verify trees), got {k}")
        run = steps if run is None else run
        if not 1 <= run <= steps:
            raise ValueError(f"run must be in 1..{steps}, got {run}")
        defer = deferring_step(k, spec, tree)
        if not self.ahead_ok(slots, k, spec, tree, steps):
            raise ValueError("this window cannot be launched before the read of the one before it (its slots' "
                             "pending context rows must be cut first): read that window first")
        dev, n = self.device, len(slots)
        if self.drafter is not None:  # a plain AR window leaves the drafter behind; the next one that feeds it catches up
            if not spec:
                self._untapped.update(slots)
            elif self._untapped.intersection(slots):
                self._retap([s for s in slots if s in self._untapped])
        max_tau = self._longest_tau(k, tree)
        upto = self._attention_length(max(self._length_bound(s) for s in slots) + self._window_reach(k, tree, steps))
        if self.cuda_graphs:
            bucket = next(b for b in self.buckets if b >= n)
            pad = list(free)[: bucket - n]
            if len(pad) < bucket - n:
                raise ValueError(f"padding {n} slots to {bucket} needs {bucket - n} free slots, got {len(pad)}")
            rows = self._rows[bucket]
            rows.copy_(self._on_device(list(slots) + pad))
            if pad:  # free slots ride along as padding: done, empty caches
                p = self._on_device(pad)
                self.done[p] = True
                self.target_cache.lengths[p] = 0
                if spec:
                    self.drafter_cache.lengths[p] = 0
                    self.context_counts[p] = 0
                    self.context_from[p] = 0
        else:
            rows = self._on_device(slots)
        self._host_rows = None if self.cuda_graphs else list(slots)  # a captured step must not bake in a slice
        if self.compiled:  # a slice when the slots are consecutive, or their span (eager forwards take the list)
            view, within = slot_span(rows, self._host_rows)
            self._row_start = view.start if isinstance(view, slice) else -1
            self._span = (view.stop - view.start, within) if within is not None else None
        self._modes = self.sampling_modes(list(slots) + (pad if self.cuda_graphs else []))
        if tree:
            self._tree_candidates(k)
        self._context_width = self._window_context_width(k, max(self._context_bound(s) for s in slots), steps)
        # AR steps (K = 1) of a drafting engine do not run the drafter: they append their context rows, which the
        # drafter takes in at once when it next drafts; a slot without room for this window's rows keeps the newest
        # half of them, and the drafter's context then starts there.
        self._defer = defer
        if self._defer:  # (behind unread windows none is cut: ahead_ok; the counts host_context holds are stale then)
            self._drop_context([s for s in slots if self._context_bound(s) + steps > self.context_rows])
        key = self._graph_key(k, spec, tree, bucket, upto) if self.cuda_graphs else None
        start_produced = self.produced[rows[:n]]
        frozen = steps > 1 or self.cuda_graphs  # rows may be done during the window: mask them
        self.step_index.zero_()
        self._captured = False
        launched = Launched(list(slots), k, steps, tree, defer, None, False, growth=steps * max_tau, max_tau=max_tau,
                            run=(rows, k, spec, upto, frozen, key, self._window_state(), start_produced,
                                 self._graphs_compiled()), spec=spec)
        self._in_flight.append(launched)
        self._queue(launched, run)
        return launched

    @torch.inference_mode()
    def resume(self, launched: "Launched", steps: int | None = None) -> None:
        """Queue a window's steps after its first ones (launch's `run`) up to `steps` in all (default: as planned;
        fewer, down to those queued already: the window ends early), then its read's tensor."""
        steps = launched.steps if steps is None else steps
        if launched.packed is not None and steps == launched.steps:  # all its steps were queued at launch
            return
        if launched.packed is not None or not launched.ran <= steps <= launched.steps:
            raise ValueError(f"a window launched for {launched.steps} steps, {launched.ran} queued, cannot be resumed "
                             f"to {steps}" + (" (it is complete)" if launched.packed is not None else ""))
        launched.steps = steps
        self._set_window_state(launched.run[6])
        self._captured = False
        self._queue(launched, steps - launched.ran)

    def _queue(self, launched: "Launched", steps: int) -> None:
        """Queue `steps` more steps of a launched window; once it has all its steps, its read's tensor (and on CUDA
        its copy to the host, which read() waits for: not for windows queued after it)."""
        rows, k, spec, upto, frozen, key, _, start_produced, graphs = launched.run
        for _ in range(steps):
            self._run(rows, k, spec, upto, frozen, key, launched.tree)
        launched.ran += steps
        launched.warmup = launched.warmup or self._captured
        if launched.ran < launched.steps:
            return
        # The one host read: per slot produced, done, cache length, τ of each step (tree: and its chain equivalent),
        # and the new output tokens.
        dev, n, steps = self.device, len(launched.slots), launched.steps
        act = rows[:n]
        width = steps * k
        cols = (start_produced[:, None] + torch.arange(width, device=dev)).clamp_max(self.out.shape[1] - 1)
        parts = [self.produced[act][:, None] - start_produced[:, None], self.done[act].long()[:, None],
                 self.target_cache.lengths[act][:, None], self.tau_log[:steps, act].t()]
        if launched.tree:
            parts.append(self.chain_log[:steps, act].transpose(0, 1).reshape(n, 2 * steps))
        launched.packed = torch.cat(parts + [self.out[act[:, None], cols]], dim=1)
        launched.warmup = launched.warmup or self._graphs_compiled() != graphs
        launched.run = ()
        if dev.type == "cuda":
            launched.host = launched.packed.to("cpu", non_blocking=True)  # pinned: the copy is queued, not waited for
            launched.ready = torch.cuda.Event()
            launched.ready.record()

    def discard(self, launched: "Launched") -> None:
        """Drop a window never to be read (its slots are all released: a later prefill resets whatever it did to
        them)."""
        if launched in self._in_flight:
            self._in_flight.remove(launched)

    def forget_in_flight(self) -> None:
        """Forget every unread window (a new scheduler: the slots are all prefilled anew before use)."""
        self._in_flight.clear()

    def ahead_ok(self, slots: list[int], k: int, spec: bool, tree: bool, steps: int) -> bool:
        """Whether a window can be launched now while earlier ones are unread: only a deferring (K = 1) window whose
        slots might have to cut their pending context rows (exact counts needed) cannot."""
        if not deferring_step(k, spec, tree) or not self._in_flight:
            return True
        return all(self._context_bound(s) + steps <= self.context_rows for s in slots)

    def _on_device(self, values: list[int]) -> torch.Tensor:
        """Host ints as a long tensor on the device, copied without waiting for the device: from pinned memory on CUDA
        (torch.tensor(..., device="cuda") waits for every queued kernel first, which a window launched ahead must
        not)."""
        t = torch.tensor(values, dtype=torch.long)
        return t.pin_memory().to(self.device, non_blocking=True) if self.device.type == "cuda" else t

    def _length_bound(self, slot: int) -> int:
        """A slot's target cache length after the windows queued so far: exact as of the last read, plus the most
        the unread windows may add."""
        return self.host_lengths[slot] + sum(w.growth for w in self._in_flight if slot in w.slots)

    def _context_bound(self, slot: int) -> int:
        """A slot's pending context rows after the windows queued so far (exact without unread windows): a drafting
        window leaves at most its longest τ, a deferring one adds one per step, a plain AR one adds none."""
        pending = self.host_context[slot]
        for w in self._in_flight:
            if slot in w.slots and w.spec:  # (a plain AR window leaves them as they were)
                pending = pending + w.steps if w.defer else w.max_tau
        return pending

    def _window_state(self) -> tuple:
        """What the step reads of its window besides its arguments (set by launch; a resumed window's restored)."""
        return self._host_rows, self._row_start, self._span, self._modes, self._context_width, self._defer

    def _set_window_state(self, state: tuple) -> None:
        self._host_rows, self._row_start, self._span, self._modes, self._context_width, self._defer = state

    def _window_reach(self, k: int, tree: bool, steps: int) -> int:
        """How far past its slots' cache lengths a window of `steps` steps verifying k positions (a tree: k nodes)
        attends: each step verifies k positions past its cache (a tree's nodes before compaction) and keeps at most its
        longest τ, so (steps - 1) x that + k (for trees less than steps x k: fewer length buckets crossed)."""
        return (steps - 1) * self._longest_tau(k, tree) + k

    def _longest_tau(self, k: int, tree: bool) -> int:
        """The longest τ a step verifying k positions (a tree: k nodes) can have."""
        return Draft("tree" if tree else "chain", k).max_tau(self.block_size)

    def _attention_length(self, upto: int) -> int:
        """The attention length of a window's steps whose slots' cache lengths stay <= upto: upto itself, or on CUDA a
        few lengths, not one per step (length_bucket): a captured step is one graph per length, and eagerly PyTorch's
        cuDNN attention builds a plan per new shape (H200, torch 2.11: 40-700 ms each, measured; the host loop's step
        at Qwen3-8B dims took 140-400 ms for ~9 ms of models)."""
        return length_bucket(upto, self.target_cache.capacity) if self.device.type == "cuda" else upto

    def _window_context_width(self, k: int, pending: int, steps: int) -> int:
        """Context rows the drafter takes in per step of a window verifying k slots (or k tree nodes), `pending` the
        most any of its slots has pending now: exactly those when the window is one eager step (their last τ, known
        from the last read); else enough for any step of the window: what is pending now (the previous window may
        have verified more than k slots) and at most k after each step of this one."""
        width = pending if steps == 1 and not self.cuda_graphs else max(k, pending)
        if self.compiled:  # widths 0 and 1 would each trace a graph of their own (torch.compile specializes them)
            width = min(max(width, 2), self.context_rows)
        if self.cuda_graphs:  # a captured step per width, so two widths per draft (a bound: each slot takes its own
            # count): the block's (what a drafting step leaves pending: its τ) or all the rows (after an AR stretch);
            # else every pending count after an AR stretch (1..context_rows) captured a graph of its own
            block = max(k, self.block_size)
            width = block if width <= block else self.context_rows
        return width

    def read(self, launched: "Launched") -> WindowResult:
        """The window's one host read (waits for its steps, not for windows queued after it) and what the host keeps
        of it."""
        if launched.packed is None:
            raise ValueError(f"a window with {launched.ran} of its {launched.steps} steps queued cannot be read: "
                             "resume it first")
        slots, steps, tree = launched.slots, launched.steps, launched.tree
        if launched.ready is not None:
            launched.ready.synchronize()
            packed = launched.host.tolist()
        else:
            packed = launched.packed.tolist()
        if launched in self._in_flight:
            self._in_flight.remove(launched)
        result = WindowResult([], [], [], warmup=launched.warmup)
        tokens_at = 3 + steps * (3 if tree else 1)
        for s, row in zip(slots, packed):
            count, done, length = row[0], bool(row[1]), row[2]
            taken = [t for t in row[3: 3 + steps] if t > 0]
            self.host_lengths[s] = length
            if launched.defer:  # pending context rows: one more per step taken
                self.host_context[s] += len(taken)
            elif taken and launched.spec:  # the last step's τ rows (a plain AR window leaves them as they were)
                self.host_context[s] = taken[-1]
            result.new_tokens.append(row[tokens_at: tokens_at + count])
            result.taus.append(taken)
            result.done.append(done)
            if tree:
                chain = row[3 + steps: tokens_at]
                result.chain_equivalent.append([(chain[2 * i], chain[2 * i + 1]) for i in range(steps) if row[3 + i] > 0])
        return result

    def _retap(self, slots: list[int]) -> None:
        """Slots whose windows since their last drafting or deferring one were plain AR (no taps): their drafter's
        context restarts at their target cache's length, with nothing pending and nothing before it visible (as when
        pending rows are cut: context_from). Queued on the device, so behind unread windows it takes their lengths."""
        rows = self._on_device(slots)
        lengths = self.target_cache.lengths[rows]
        self.drafter_cache.lengths[rows] = lengths
        self.context_from[rows] = lengths
        self.context_counts[rows] = 0
        for s in slots:
            self.host_context[s] = 0
        self._untapped.difference_update(slots)

    def _drop_context(self, slots: list[int]) -> None:
        """Keep the newest context_kept of these slots' pending context rows; the drafter's context starts at the
        first kept one (an AR stretch longer than the rows: the drafter would otherwise have to run to take them in,
        the cost a drafting engine's AR steps avoid; measured on the fixture pair, a drafter that sees only the last
        64 positions accepts within 1 % of one that sees them all)."""
        for s in slots:
            pending = self.host_context[s]
            keep = min(pending, self.context_kept)
            drop = pending - keep
            self.context[s, :keep] = self.context[s, drop:pending].clone()
            self.drafter_cache.lengths[s] += drop
            self.context_from[s] = self.drafter_cache.lengths[s]
            self.context_counts[s] = keep
            self.host_context[s] = keep

    def _run(self, rows: torch.Tensor, k: int, spec: bool, upto: int, frozen: bool, key, tree: bool) -> None:
        if key is None:
            self._step_fn(rows, k, spec, upto, frozen, tree)
            return
        graph = self.graphs.get(key)
        if graph is None:  # the first step of this shape runs eagerly, then is captured
            torch.cuda.synchronize(self.device)  # (the window's earlier steps are not this shape's first use)
            t0 = time.perf_counter()
            graph = self._captured_step(lambda: self._step_fn(rows, k, spec, upto, frozen, tree), self._pool)
            self._pool = graph.pool()
            self.graphs[key] = graph
            self._captured = True
            self.capture_s += time.perf_counter() - t0
            return  # the capture recorded the step without running it; _captured_step's eager run was this step
        graph.replay()
        self.graph_replays += 1

    def _graph_key(self, k: int, spec: bool, tree: bool, bucket: int, upto: int) -> tuple:
        """A captured step's shape: its draft, batch bucket, attention length and (drafting steps) the context width
        set for the window; a deferring (K = 1) or plain AR step reads no context rows, so its width is no part of its
        graph."""
        return (k, spec, tree, bucket, upto, self._context_width if spec and not self._defer else 0, self._defer)

    def _captured_step(self, step, pool) -> torch.cuda.CUDAGraph:
        """step() run eagerly once (warms up cuBLAS, the plugins: the step it runs is real), then captured into a CUDA
        graph in memory pool `pool` (a capture records the step without running it)."""
        step()
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            step()
        return graph

    def _graphs_compiled(self) -> int:
        """Graphs torch.compile has made in this process so far (0 without compile): a window that made one spent
        its time compiling."""
        if not self.compiled:
            return 0
        from torch._dynamo.utils import counters

        return counters["stats"]["unique_graphs"]

    def sampling_modes(self, slots: list[int]) -> SamplingModes:
        """What the host knows of these slots' sampling parameters (set at prefill)."""
        return SamplingModes.of([self.host_sampling[s] for s in slots], self.target.lm_head.weight.shape[0])

    def _host_slots(self, rows: torch.Tensor) -> list[int] | slice | tuple | None:
        """The step's slots as the forwards take them on the host (`host_slots`): the window's list, eagerly. A
        compiled step gets slice(start, start + n) built from ints, which torch.compile treats as dynamic once they
        change (a list would be guarded element by element: a recompile for every new set of slots): the slots' own
        rows when consecutive, else the span between them with their rows in it (kv_cache.slot_span), or None (an
        index gather) when the span is too wide."""
        if not self.compiled:
            return self._host_rows
        if self._row_start < 0:
            return None
        if self._span is None:
            return slice(self._row_start, self._row_start + rows.shape[0])
        width, within = self._span
        return slice(self._row_start, self._row_start + width), within

    def draft_logits(self, rows: torch.Tensor, last: torch.Tensor, starts: torch.Tensor, counts: torch.Tensor,
                     k: int, upto: int) -> torch.Tensor:
        """The drafter's forward in a step: block [last, MASK x (B-1)] -> drafter (taking in the rows' new context) ->
        the target's LM head on slots 1..k-1: logits [n, k-1, V]."""
        return self.target.logits(self._draft_hidden(rows, last, starts, counts, k, upto))

    def _draft_hidden(self, rows: torch.Tensor, last: torch.Tensor, starts: torch.Tensor, counts: torch.Tensor,
                      k: int, upto: int) -> torch.Tensor:
        """draft_logits' drafter forward: the final-normed hidden states of block slots 1..k-1 [n, k-1, H]."""
        drafter = self.drafter
        block_ids, block_pos = self.ops.prepare_block(last, starts, drafter.mask_token_id, drafter.block_size)
        hidden = drafter(self.target.embed(block_ids), block_pos, self.context[rows, : self._context_width], counts,
                         self.drafter_cache, rows, upto, host_slots=self._host_slots(rows),
                         context_from=self.context_from[rows])
        return hidden[:, 1:k]

    def draft(self, rows: torch.Tensor, last: torch.Tensor, starts: torch.Tensor, counts: torch.Tensor, k: int,
              upto: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A chain: argmax drafts for slots 1..k-1 (a DFlash2 drafter: its candidate selector's greedy walk, at every
        temperature; see DFlashDrafter.select_drafts). Returns (verify ids [n, k] = [last, drafts], drafts [n, k-1])."""
        if getattr(self.drafter, "candidate_selector", None) is not None:
            hidden = self._draft_hidden(rows, last, starts, counts, k, upto)
            drafts = self.drafter.select_drafts(hidden, self.target.logits(hidden), last)
            return torch.cat([last[:, None], drafts], dim=1), drafts
        logits = self.draft_logits(rows, last, starts, counts, k, upto)
        verify_ids, drafts, _ = self.ops.drafts_to_verify(last, logits, starts)
        return verify_ids, drafts

    def draft_tree(self, rows: torch.Tensor, last: torch.Tensor, starts: torch.Tensor, counts: torch.Tensor,
                   nodes: int, upto: int) -> DraftTree:
        """A draft tree of `nodes` nodes from the same drafter forward (spec/tree.py), as deep as the block allows.
        A DFlash2 drafter's tree is built from its per-slot marginals (its convolutions apply; its candidate selector,
        a single path, does not): still lossless, as any tree is."""
        depth = max_depth(nodes, self.drafter.block_size)
        return build_tree(self.draft_logits(rows, last, starts, counts, depth + 1, upto), last, nodes,
                          self._tree_candidates(nodes))

    def _tree_candidates(self, nodes: int):
        """build_tree's static candidates for a tree of `nodes` nodes, made before the step runs (launch,
        _timed_step): a compiled step then reads them as constants instead of tracing their construction."""
        cands = self._tree_cands.get(nodes)
        if cands is None:  # kept per size: auto's windows move between sizes (tree:32's took 6.4 ms to build on CPU)
            depth = max_depth(nodes, self.drafter.block_size)
            cands = self._tree_cands[nodes] = tree_candidates(nodes, depth, self.target.lm_head.weight.shape[0],
                                                              self.device)
        return cands

    def _step(self, rows: torch.Tensor, k: int, spec: bool, upto: int, frozen: bool, tree: bool = False) -> None:
        """One step for `rows`, device-only (no host reads: capturable). frozen: some rows may already be done (a
        window of several steps, or padding); their emission is dropped and their caches do not advance. tree: verify
        a draft tree of k nodes; the accepted path then stands where a chain's accepted prefix would."""
        tc, ops, dev = self.target_cache, self.ops, rows.device
        n = rows.shape[0]
        starts = tc.lengths[rows]
        last = self.last[rows]
        if spec:
            dc = self.drafter_cache
            counts = self.context_counts[rows]
            drafter_starts = dc.lengths[rows] if frozen else None
            if tree:
                nodes = self.draft_tree(rows, last, starts, counts, k, upto)
                verify_ids, drafts = nodes.tokens, torch.full((n, k - 1), -1, dtype=torch.long, device=dev)
            elif k > 1:
                verify_ids, drafts = self.draft(rows, last, starts, counts, k, upto)
            else:  # K = 1: an AR step; its context row joins the pending ones (self._defer)
                verify_ids, drafts = last[:, None], torch.empty(n, 0, dtype=torch.long, device=dev)
        else:
            verify_ids, drafts = last[:, None], torch.empty(n, 0, dtype=torch.long, device=dev)
        logits, features = self.target(verify_ids, tc, rows, tap=spec, max_length=upto, host_slots=self._host_slots(rows),
                                       tree=(nodes.depth, nodes.ancestors) if tree else None)
        positions = starts[:, None] + 1 + (nodes.depth if tree else torch.arange(k, device=dev))
        produced = self.produced[rows]
        remaining = self.budget[rows] - produced
        if frozen:
            was_done = self.done[rows]
            remaining = remaining.clamp_min(1)  # done rows: any budget, their emission is dropped
        res = ops.sample_accept(logits, drafts, self.temperature[rows], self.top_k[rows], self.top_p[rows],
                                self.keys[rows], positions, self.stop_ids[rows], remaining, modes=self._modes)
        if tree:  # the target's token at every node -> the accepted root path, its K/V moved into place
            path, res = ops.tree_accept(nodes.tokens, nodes.parents, nodes.depth, res.target_tokens,
                                        self.stop_ids[rows], remaining, max_depth(k, self.drafter.block_size) + 1)
            for k_store, v_store in tc.kv_stores():
                ops.compact_kv(k_store, v_store, rows, starts, path)
            chain = chain_equivalent(nodes, path, res.accepted, res.target_tokens)
            self.chain_log.index_put_((self.step_index.expand(n), rows), chain)
            features = features.gather(1, path[..., None].expand(-1, -1, features.shape[-1]))
            k = path.shape[1]
        emitted = torch.where(was_done, 0, res.num_emitted) if frozen else res.num_emitted
        # The emitted tokens go to the slot's output row; the others to the dump columns at its end.
        j = torch.arange(k, device=dev)
        cols = torch.where(j[None, :] < emitted[:, None], produced[:, None] + j, self.out.shape[1] - k + j)
        self.out[rows[:, None], cols] = res.target_tokens
        self.produced[rows] = produced + emitted
        tau = res.accepted + 1
        self.done[rows] = (was_done | res.finished) if frozen else res.finished
        self.tau_log.index_put_((self.step_index.expand(n), rows), torch.where(was_done, 0, tau) if frozen else tau)
        self.step_index += 1
        if spec and self._defer:  # the target's side as usual; the step's one context row appended to the pending ones
            ops.commit_step(res.accepted, rows, starts, tc.lengths, target_tokens=res.target_tokens, last_tokens=self.last)
            self.context.index_put_((rows, counts), features[:, 0].to(self.context.dtype))
            self.context_counts[rows] = counts + 1
            if frozen:
                self.context_counts[rows] = torch.where(was_done, counts, self.context_counts[rows])
        elif spec:
            ops.commit_step(res.accepted, rows, starts, tc.lengths, features.to(self.context.dtype), self.context,
                            self.context_counts, dc.lengths, res.target_tokens, self.last)
            if frozen:
                dc.lengths[rows] = torch.where(was_done, drafter_starts, dc.lengths[rows])
                self.context_counts[rows] = torch.where(was_done, counts, self.context_counts[rows])
        else:
            ops.commit_step(res.accepted, rows, starts, tc.lengths, target_tokens=res.target_tokens, last_tokens=self.last)
        if frozen:
            tc.lengths[rows] = torch.where(was_done, starts, tc.lengths[rows])

    # ---- cost of a step (the draft budget's cost table) --------------------------------------------------------------

    @torch.inference_mode()
    def time_step(self, n: int, k: int, spec: bool = True, length: int = 256, repeats: int = 5,
                  tree: bool = False) -> float:
        """Median seconds of one step (eager; a replayed CUDA graph with cuda_graphs) of `n` slots verifying `k` slots
        (tree: a draft tree of k nodes), at cache length `length` with dummy tokens (after one warm-up step). Uses
        slots 0..n-1, which must be free: their state is reset afterwards (empty caches, done)."""
        self._timed_step(n, k, spec, length, tree)  # warms up
        times = sorted(self._timed_step(n, k, spec, length, tree) for _ in range(repeats))
        self._free_timing_graphs()
        return times[len(times) // 2]

    @torch.inference_mode()
    def _timed_step(self, n: int, k: int, spec: bool, length: int, tree: bool) -> float:
        """Seconds of one step as time_step describes it, slots 0..n-1 left free. With CUDA graphs (n a batch bucket)
        the step is what the device loop's windows run: captured once per shape (after an eager run of it) and timed
        as a replay, frozen rows and all; eagerly, a small model's step on a GPU is mostly kernel launches, which the
        graphs take away (a chain and a tree then cost about the same)."""
        dev = self.device
        n = min(n, self.max_batch_size)
        length = self._timing_length(length, k)
        spec = spec and self.drafter is not None
        graphed = self.cuda_graphs and n in self._rows
        rows = self._rows[n] if graphed else torch.arange(n, device=dev)
        if tree and spec:
            self._tree_candidates(k)

        # attention and context rows as a window of max_window steps from `length` runs them (launch)
        upto = self._attention_length(min(length + self._window_reach(k, tree, self.max_window),
                                          self.target_cache.capacity))

        def step():
            self._step_fn(rows, k, spec, upto, graphed, tree)

        run = step
        if graphed:
            rows.copy_(torch.arange(n, device=dev))
            key = (n, k, spec, tree, length)
            graph = self._timing_graphs.get(key)
            if graph is None:  # as _run (the state is set again below, before the timed replay); in a pool of
                self._timing_state(rows, n, k, spec, length, tree, graphed)  # its own: these graphs are freed
                graph = self._captured_step(step, self._timing_pool)
                self._timing_pool = graph.pool()
                self._timing_graphs[key] = graph
            run = graph.replay
        self._timing_state(rows, n, k, spec, length, tree, graphed)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        run()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        seconds = time.perf_counter() - t0
        self._timing_reset(rows, spec)
        return seconds

    def _timing_length(self, length: int, k: int) -> int:
        """A timed step's cache length: as asked, capped so that its k verified slots fit max_seq_len."""
        return max(1, min(length, self.max_seq_len - k - 1))

    def _free_timing_graphs(self) -> None:
        self._timing_graphs.clear()
        self._timing_pool = None

    def _timing_state(self, rows: torch.Tensor, n: int, k: int, spec: bool, length: int, tree: bool,
                      graphed: bool) -> None:
        """Slots 0..n-1 as a timed step finds them: `length` cached positions, greedy, no stops, about the last τ of
        drafter context pending."""
        pending = max(1, k // 2)  # drafter context rows a step takes in: about the last τ
        self.target_cache.lengths[rows] = length
        self.last[rows] = 0
        self.temperature[rows], self.top_k[rows], self.top_p[rows], self.keys[rows] = 0.0, 0, 1.0, 0
        self.stop_ids[rows] = -1
        self.budget[rows], self.produced[rows], self.done[rows] = self.max_seq_len, 0, False
        self.step_index.zero_()
        if spec:
            self.drafter_cache.lengths[rows] = length - pending
            self.context_counts[rows] = pending
            self.context_from[rows] = 0
        # a captured step must not bake in a slice of the rows (as launch())
        self._host_rows, self._row_start, self._span, self._modes = None if graphed else list(range(n)), 0, None, GREEDY
        self._context_width = self._window_context_width(k, pending, self.max_window)
        self._defer = deferring_step(k, spec, tree)  # what auto's AR windows cost

    def _timing_reset(self, rows: torch.Tensor, spec: bool) -> None:
        """Slots 0..n-1 free again after a timed step: empty caches, done."""
        self.target_cache.lengths[rows] = 0
        self.done[rows], self.produced[rows], self.budget[rows] = True, 0, 0
        self.step_index.zero_()
        self.tau_log.zero_()
        self._defer = False
        if spec:
            self.drafter_cache.lengths[rows] = 0
            self.context_counts[rows] = 0

    def measure_costs(self, drafts: list[Draft], lengths: tuple[int, ...] = COST_LENGTHS, repeats: int = 3,
                      warm: int = 3, warm_s: float = 0.02) -> dict[tuple[int, Draft, int], float]:
        """(n, draft, cache length) -> seconds per step (the fastest of its timings) for n in the batch buckets, every
        draft (chain:1: an AR step of the drafting engine, the drafter deferred) and each of `lengths` (capped so the
        longest draft's window fits max_seq_len; attention reads the whole cache, for more query rows the larger the
        draft, so the drafts' ratios move with the context: spec.budget.CostTable interpolates between the lengths).
        Round robin: every round times each entry once, so a machine whose speed drifts (a shared VM, clocks) shifts
        every entry alike instead of the ones timed last — the choice depends only on their ratios. Each timed step
        follows untimed ones of the same shape (at least `warm`, for at least `warm_s` seconds), as in a run, where
        windows of one shape follow each other: after a big step (a tree at batch 16), an AR step at batch 8 took 4.8 /
        4.6 / 3.9 / 3.1 / 3.0 ms with 0 / 1 / 2 / 4 / 8 steps of its own before it (CPU, fixture pair), while the
        drafting steps, more work each, hardly change — timed cold, AR came out 30-40 % dearer against them than in a
        run, and auto took probes for cheaper than they were; after 3 steps still 15-30 % (batch 8 at 128 positions:
        2.8-2.9 ms, after 8 steps 2.2-2.5, a run of them 2.3). Each round starts a third (1 / repeats) further down the
        shapes, so a slowness at one place of the round reaches a different shape each round.

        The fastest timing, not the median: a machine's noise only ever adds time, and it comes in bursts longer than
        a round. Two of six batch-1 tables timed in fresh processes on this CPU (2026-11-27) had most entries' two
        fastest timings > 10 % apart; their medians put tree:16 at 1.42 / 2.00x chain:8 (1.31-1.34x in the quiet
        ones), their minimums at 1.31 / 1.13x (the latter slow in every round: hence the further rounds below; six
        tables timed so gave 1.32-1.35x, one of them in five rounds). Which draft the startup table favours is what
        auto runs at batch 1, and a draft it prices high never runs, so its entry is never corrected (CostTable.observe
        moves the drift and the entry of the draft that runs): runs on such tables read 0.90-0.93x the best fixed
        draft. While more than a quarter of the entries' two fastest timings are more than SETTLED apart (a noisy
        machine), further rounds follow, up to `repeats` more. All slots must be free."""
        lengths = sorted({self._timing_length(length, max(d.size for d in drafts)) for length in lengths})
        shapes = [(n, d, length) for length in lengths for n in bucket_sizes(self.max_batch_size) for d in drafts]
        times: dict[tuple[int, Draft, int], list[float]] = {s: [] for s in shapes}
        for r in range(2 * repeats):
            if r >= repeats and not _unsettled(times):  # further rounds only on a noisy machine
                break
            start = (r % repeats) * len(shapes) // repeats
            for n, d, length in shapes[start:] + shapes[:start]:
                spent = sum(self._timed_step(n, d.size, True, length, d.tree) for _ in range(warm))
                while spent < warm_s:
                    spent += self._timed_step(n, d.size, True, length, d.tree)
                times[(n, d, length)].append(self._timed_step(n, d.size, True, length, d.tree))
        self._free_timing_graphs()  # the device loop's windows capture their own
        return {s: min(t) for s, t in times.items()}

    @torch.inference_mode()
    def capture_graphs(self, drafts: list[Draft], spec: bool) -> int:
        """Capture now every step shape windows of these drafts may run (with CUDA graphs; else nothing): each batch
        bucket x attention length bucket x context width (a drafting step's two: the block's, all the rows; a deferring
        one's none), each after an eager run of it on dummy state in free slots, as a window's first use of a shape
        would. A server calls it at start, so that no request waits for a capture: a window that meets a new shape runs
        it eagerly and captures it (7-12 ms each on an H200 with the fixture pair; more with a bigger model), and auto's
        windows meet many shapes (drafts x lengths x widths), some only under a load the first requests did not bring.
        Returns how many graphs it captured (shapes already captured are kept). All slots must be free."""
        if not self.cuda_graphs:
            return 0
        before, capture_s = len(self.graphs), self.capture_s
        for rows, k, spec_, tree, upto, key in self._capture_states(drafts, spec):
            if key not in self.graphs:
                self._run(rows, k, spec_, upto, True, key, tree)
        torch.cuda.synchronize(self.device)
        self.capture_s, self._captured = capture_s, False  # (capture_s: what windows spent on first uses)
        return len(self.graphs) - before

    def _capture_states(self, drafts: list[Draft], spec: bool):
        """For capture_graphs: per step shape of these drafts, its slots (0..bucket-1, free) set up as a window of that
        shape finds them (dummy tokens, a cache length whose window reaches the shape's attention length, its context
        width), yielded as (rows, k, spec, tree, attention length, graph key), then freed again."""
        if not all(self.done.tolist()):
            raise ValueError("capturing step shapes needs every slot free (no request live)")
        spec = spec and self.drafter is not None
        capacity = self.target_cache.capacity
        uptos = sorted({length_bucket(b, capacity) for b in powers_of_two_to(capacity)})
        # the largest shapes first, as vLLM captures: the later, smaller ones reuse the shared pool's memory
        for d in sorted(drafts, key=lambda d: -d.size):
            k, tree = d.size, d.tree and spec
            defer = deferring_step(k, spec, tree)
            reach, nearest = self._window_reach(k, tree, self.max_window), self._window_reach(k, tree, 1)
            pending = (0, self.context_rows) if spec and not defer else (0,)  # (a deferring step's width: unused)
            widths = sorted({self._window_context_width(k, p, self.max_window) for p in pending})
            if tree:
                self._tree_candidates(k)
            for bucket in reversed(self.buckets):
                rows = self._rows[bucket]
                for upto in reversed(uptos):
                    if upto < length_bucket(1 + nearest, capacity):  # no window attends this short
                        continue
                    # a window whose attention reaches upto from there; at least k, so that the drafter's context
                    # (k // 2 rows) starts at a position >= 0; its k positions fit (upto >= 64 >= 2k)
                    length = max(upto - reach, k)
                    for width in widths:
                        rows.copy_(torch.arange(bucket, device=self.device))
                        self._timing_state(rows, bucket, k, spec, length, tree, True)
                        self._context_width, self._defer = width, defer
                        yield rows, k, spec, tree, upto, self._graph_key(k, spec, tree, bucket, upto)
                        self._timing_reset(rows, spec)


def _unsettled(times: dict) -> bool:
    """Whether more than a quarter of the entries' two fastest timings are more than SETTLED apart (measure_costs)."""
    spread = [b > a * (1 + SETTLED) for a, b in (sorted(t)[:2] for t in times.values() if len(t) >= 2)]
    return 4 * sum(spread) > len(spread)
