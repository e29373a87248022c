"""The torch engine: DFlash speculative decoding (and plain AR) for a batch of prompts, on CPU or any CUDA GPU.

The engine owns the models, the tokenizer and one `SpecStep` (spec/step.py: the KV caches, every per-slot buffer,
the ops table and the CUDA-graph cache, made once). `generate` / `stream` run every prompt through a `BatchScheduler`
(engines/scheduler.py: in-flight batching, no tensor math), which prefills requests and runs windows of steps:

  1. block   [last token, MASK x (B-1)] at positions start..start+B-1
  2. draft   drafter forward (context = target features of last step's verified tokens) -> argmax -> drafts
  3. verify  target forward over [last token, drafts[:K-1]] with hidden-state taps
  4. accept  target token per slot (argmax / keyed sample), a = matching prefix, emit a + 1 tokens (cut at a stop
             token or the budget)
  5. book    target cache length = start + a + 1; the a + 1 verified tokens' features become the next context;
             the bonus token is the next step's last token
AR is the same step with K = 1 and no drafter. decode_loop "host" runs windows of one step (one host read per step);
"device" runs windows of steps_per_sync steps (CUDA graphs on a GPU with the plugin library); "auto" (the default) is
"device" where those graphs run (a CUDA device, the plugin kernels loaded, a capturable target), else "host".
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Hashable, Iterator, Sequence

import torch

from dflash_trt import checkpoint as ckpt
from dflash_trt.capabilities import DECODE_LOOPS
from dflash_trt.engines.requests import (Request, Result, StepEvent, per_prompt_params, prepare_request,
                                         verify_len_from)
from dflash_trt.engines.scheduler import BatchScheduler
from dflash_trt.errors import ConfigError, RequestError
from dflash_trt.kernels.ops import StepOps, ops_for
from dflash_trt.models.drafter import DFlashDrafter
from dflash_trt.models.target import TargetModel, load_target
from dflash_trt.spec.budget import (AUTO_TREES, AcceptanceCounts, AutoBudget, Calibration, CostTable, Draft, Fixed,
                                    GlobalTables, TreeClock, TreeCounts, auto_drafts, prior_problem)
from dflash_trt.spec.sampling import SamplingParams
from dflash_trt.spec.step import SpecStep, cache_headroom

DEFAULT_MAX_SEQ_LEN = 2048  # when not given: this, or the target's max_position_embeddings if smaller
__all__ = ["TorchEngine", "Result", "StepEvent", "resolve_device", "resolve_dtype", "check_cache_fits"]


def resolve_device(device: str | torch.device | None) -> torch.device:
    try:
        device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    except (RuntimeError, TypeError):
        raise ConfigError(f"device {str(device)!r} is not supported; use 'cpu' or 'cuda[:N]'") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was requested but torch.cuda.is_available() is False; use --device cpu")
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"device {str(device)!r} is not supported; use 'cpu' or 'cuda[:N]'")
    return device


def resolve_dtype(dtype: str | torch.dtype | None, default: torch.dtype) -> torch.dtype:
    if dtype is None or dtype == "auto":
        return default
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in ckpt.DTYPES:
        raise ConfigError(f"dtype {dtype!r} is not supported; use one of {sorted(ckpt.DTYPES)} or 'auto'")
    return ckpt.DTYPES[dtype]


def check_cache_fits(shapes: list[tuple[int, int, int]], max_batch: int, capacity: int, dtype: torch.dtype,
                     device: torch.device, state_bytes_per_slot: int = 0) -> None:
    """The KV caches (K and V for each (layers, kv_heads, head_dim) in `shapes`, max_batch x capacity positions) and
    any per-slot state (a hybrid target's recurrent states) must fit in the device's memory: a ConfigError naming the
    size and the fix instead of an allocator traceback."""
    per_position = sum(2 * layers * heads * dim for layers, heads, dim in shapes) * dtype.itemsize
    need = (per_position * capacity + state_bytes_per_slot) * max_batch
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
    else:
        free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    if need > free:
        raise ConfigError(f"the KV caches for max_batch_size {max_batch} x max_seq_len {capacity} need "
                          f"{need / 2**30:.1f} GiB but {device} has {free / 2**30:.1f} GiB free: lower --max-seq-len "
                          "or --max-batch-size")


def check_draft_prior(draft_prior: Sequence[float] | None, block_size: int) -> None:
    """A ConfigError unless draft_prior is None or one probability per draft position of the drafter's block."""
    problem = prior_problem(draft_prior, block_size - 1) if draft_prior is not None else None
    if problem:
        raise ConfigError(f"draft_prior (the drafter's acceptance per draft position, the 'auto' draft budget's "
                          f"prior) {problem}; give the build's measured curve (manifest acceptance.curve) or None")


class TorchEngine:
    """Owns the target, the optional drafter, the tokenizer and the step (caches, per-slot buffers, graphs)."""

    def __init__(self, target: TargetModel, drafter: DFlashDrafter | None = None, tokenizer=None, *,
                 max_batch_size: int = 8, max_seq_len: int | None = None, decode_loop: str = "auto",
                 steps_per_sync: int = 4, ops: StepOps | None = None, compile: bool = False,
                 draft_prior: Sequence[float] | None = None):
        limit = target.cfg.max_position_embeddings
        if max_seq_len is None:  # 2048, or less for a target made for shorter sequences
            max_seq_len = min(DEFAULT_MAX_SEQ_LEN, limit or DEFAULT_MAX_SEQ_LEN)
        for name, value, low in (("max_batch_size", max_batch_size, 1), ("max_seq_len", max_seq_len, 2),
                                 ("steps_per_sync", steps_per_sync, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
        if decode_loop not in DECODE_LOOPS:
            raise ConfigError(f"decode_loop must be 'host' (one host read per step), 'device' (steps_per_sync steps "
                              f"on the device per host read, CUDA graphs on GPU) or 'auto' (device where CUDA graphs "
                              f"run, else host), got {decode_loop!r}")
        if not isinstance(compile, bool):
            raise ConfigError(f"compile must be true or false, got {compile!r}")
        if compile and not getattr(target, "graph_capturable", True):
            raise ConfigError(f"compile: the {target.cfg.family} target runs through transformers' own modules, whose "
                              "caches read lengths on the host; torch.compile is for the native Qwen3 / Llama target: "
                              "drop --compile")
        if drafter is not None:
            check_draft_prior(draft_prior, drafter.cfg.block_size)
        if limit and max_seq_len > limit:
            raise ConfigError(f"max_seq_len {max_seq_len} exceeds the target's max_position_embeddings {limit} "
                              f"(config.json): use --max-seq-len {limit} or less")
        self.target, self.drafter, self.tokenizer = target.fuse(), drafter.fuse() if drafter is not None else None, tokenizer
        self.max_batch_size, self.max_seq_len = max_batch_size, max_seq_len
        self.device = target.lm_head.weight.device
        ops = ops or ops_for(self.device)
        # CUDA graphs need the kernels (the references read sampling flags on the host) and a capturable target
        # (a transformers-backed one is not: its MoE routing reads expert counts on the host).
        graphs = ops.name == "cuda" and getattr(target, "graph_capturable", True)
        if decode_loop == "auto":
            decode_loop = "device" if graphs else "host"
        self.decode_loop = decode_loop
        self.steps_per_sync = steps_per_sync if decode_loop == "device" else 1
        margin = cache_headroom(target, drafter)
        shapes = list(target.cache_shapes())
        if drafter is not None:
            shapes.append((drafter.cfg.num_hidden_layers, drafter.cfg.num_key_value_heads, drafter.cfg.head_dim))
        check_cache_fits(shapes, max_batch_size, max_seq_len + margin, target.lm_head.weight.dtype, self.device,
                         target.state_bytes_per_slot())
        self.step_runner = SpecStep(target, drafter, max_batch_size=max_batch_size, max_seq_len=max_seq_len,
                                    max_window=self.steps_per_sync, ops=ops,
                                    cuda_graphs=decode_loop == "device" and graphs, compile=compile)
        # One user of the caches at a time: generate/stream calls from several threads run one after the other;
        # the scheduler that owns the caches is the latest one made (an older one refuses to step).
        # The "auto" draft budget's inputs: seconds per step by (batch size, Draft), measured at the first auto
        # scheduler unless given (tests give a fixed table, with refine_draft_costs False, for a deterministic
        # choice); the prior acceptance curve per draft position (the build's measured curve: manifest.draft_prior;
        # None: spec.budget.DEFAULT_PRIOR); the tree sizes auto considers (none where the target cannot verify trees).
        self.draft_costs: dict[tuple[int, Draft], float] | None = None
        self.refine_draft_costs = True
        self._cost_table: tuple | None = None  # (draft_costs it came from, refine, the CostTable every auto run refines)
        self.draft_prior: list[float] | None = [float(p) for p in draft_prior] if draft_prior is not None else None
        self.auto_trees: tuple[int, ...] = AUTO_TREES if self.step_runner.max_tree_nodes else ()
        # the drafter's acceptance, counted over every auto run: chains, and per tree size
        self.draft_curve: AcceptanceCounts | None = None
        self.tree_curves: dict[int, TreeCounts] = {}
        self.tree_clock = TreeClock()  # ... and when it last measured a tree size (a clock every scheduler advances)
        self.draft_calibration = Calibration()  # ... and what its drafts accepted against what was expected
        self.draft_tables = GlobalTables()  # ... and the estimates at its curve (each new budget starts from them)
        # a budget whose batch's last observations wait to be taken in during the engine's next window (on a GPU: see
        # BatchScheduler._hand_over)
        self.untaken_budget: AutoBudget | Fixed | None = None
        self._lock = threading.Lock()
        self._lock_thread: int | None = None
        self.cache_owner: object | None = None

    @classmethod
    def from_pretrained(cls, target_dir: str | os.PathLike, drafter_dir: str | os.PathLike | None = None, *,
                        device: str | torch.device | None = None, dtype: str | torch.dtype | None = None,
                        max_batch_size: int = 8, max_seq_len: int | None = None, tokenizer: bool = True,
                        decode_loop: str = "auto", steps_per_sync: int = 4, ops: StepOps | None = None,
                        compile: bool = False, draft_prior: Sequence[float] | None = None) -> "TorchEngine":
        device = resolve_device(device)
        target_cfg = ckpt.load_target_config(target_dir)
        drafter_cfg = None
        if drafter_dir is not None:  # validate the pair before reading any weights
            drafter_cfg = ckpt.load_drafter_config(drafter_dir)
            ckpt.check_pair(target_cfg, drafter_cfg, drafter_dir)
            check_draft_prior(draft_prior, drafter_cfg.block_size)
        dtype = resolve_dtype(dtype, target_cfg.dtype)
        target = load_target(target_dir, dtype, device, target_cfg)  # native or transformers-backed, by config.json
        drafter = DFlashDrafter.from_pretrained(drafter_dir, dtype, device, drafter_cfg) if drafter_cfg else None
        tok = ckpt.load_tokenizer(target_dir) if tokenizer else None
        return cls(target, drafter, tok, max_batch_size=max_batch_size, max_seq_len=max_seq_len, decode_loop=decode_loop,
                   steps_per_sync=steps_per_sync, ops=ops, compile=compile, draft_prior=draft_prior)

    def replace_drafter(self, drafter: DFlashDrafter) -> None:
        """Serve another drafter of the same shape (the build's gate: the exported quantized drafter after the
        unquantized one): same layers, KV heads, head_dim, block_size and taps, so the caches and buffers fit."""
        old, new = self.drafter.cfg, drafter.cfg
        for name in ("num_hidden_layers", "num_key_value_heads", "head_dim", "block_size", "target_layer_ids",
                     "hidden_size"):
            if getattr(old, name) != getattr(new, name):
                raise ConfigError(f"replace_drafter: the new drafter's {name} {getattr(new, name)!r} differs from "
                                  f"{getattr(old, name)!r}; make a new engine for it")
        step = self.step_runner  # the positions SpecStep precomputed for the first drafter
        drafter.rotary.precompute(step.target_cache.capacity + step.block_size, self.target.lm_head.weight.dtype)
        self.drafter = self.step_runner.drafter = drafter.fuse()

    @property
    def target_cache(self):
        return self.step_runner.target_cache

    @property
    def drafter_cache(self):
        return self.step_runner.drafter_cache

    # ---- public API --------------------------------------------------------------------------------------------------

    def generate(self, prompts: Sequence[str | Sequence[int]], params: SamplingParams | Sequence[SamplingParams] | None = None,
                 *, verify_len: int | None = None, use_drafter: bool = True, block_size: int | None = None,
                 draft: str | None = None) -> list[Result]:
        """Generate for every prompt (text or token ids). `draft` "chain:K" (= `verify_len` K <= the drafter's
        block_size B: the target verifies K block slots per step) or "auto" (K chosen per window: spec/budget.py);
        use_drafter=False (or no drafter) runs plain AR with the same engine. A prompt whose generation fails ends with
        finish_reason "error" (Result.error); the others are unaffected."""
        results: list[Result | None] = [None] * len(prompts) if isinstance(prompts, Sequence) else []
        for _ in self._run(prompts, params, verify_len_from(verify_len, block_size), use_drafter, results, draft):
            pass
        return results  # type: ignore[return-value]

    def stream(self, prompts: Sequence[str | Sequence[int]], params: SamplingParams | Sequence[SamplingParams] | None = None,
               *, verify_len: int | None = None, use_drafter: bool = True,
               block_size: int | None = None, draft: str | None = None) -> Iterator[StepEvent]:
        """Like generate, but yields the tokens each window appends to each request as they are accepted."""
        results: list[Result | None] = [None] * len(prompts) if isinstance(prompts, Sequence) else []
        yield from self._run(prompts, params, verify_len_from(verify_len, block_size), use_drafter, results, draft)

    def new_scheduler(self, *, verify_len: int | None = None, use_drafter: bool = True,
                      steps_per_sync: int | None = None, draft: str | None = None) -> BatchScheduler:
        """An in-flight batch over this engine (it takes over the engine's caches)."""
        return BatchScheduler(self, verify_len=verify_len, use_drafter=use_drafter, steps_per_sync=steps_per_sync,
                              draft=draft)

    def draft_budget(self, kind: str, k: int) -> Fixed | AutoBudget:
        """A new scheduler's draft budget: a fixed chain of K, a fixed tree of N nodes, or "auto" over a cost table of
        this engine's steps (`draft_costs`: measured once per engine with SpecStep.measure_costs, unless set; one table
        per engine, refined online by every scheduler's windows, so a run starts from what the last one learnt)."""
        if kind == "tree" and not self.step_runner.max_tree_nodes:
            raise RequestError(f"draft 'tree:{k}': this target ({self.target.cfg.family}) has linear-attention "
                               "layers, whose recurrent state follows one sequence, not a tree's branches; use "
                               "'chain:K' or 'auto'")
        if kind != "auto":
            return Fixed(Draft(kind, k))
        if self.draft_costs is None:
            self.draft_costs = self.step_runner.measure_costs(auto_drafts(k, self.auto_trees))
        if self.draft_curve is None:
            self.draft_curve = AcceptanceCounts.empty(k - 1)
        kept = self._cost_table
        if kept is None or kept[0] is not self.draft_costs or kept[1] != self.refine_draft_costs:  # one per engine
            kept = self._cost_table = (self.draft_costs, self.refine_draft_costs,
                                       CostTable.measured(self.draft_costs, refine=self.refine_draft_costs))
        return AutoBudget(k, kept[2],
                          prior=self.draft_prior, curve=self.draft_curve, trees=self.auto_trees,
                          tree_curves=self.tree_curves, tree_clock=self.tree_clock,
                          calibration=self.draft_calibration, tables=self.draft_tables)

    @property
    def cost_table(self) -> CostTable | None:
        """The cost table auto's schedulers on this engine refine (None before the first)."""
        return self._cost_table[2] if self._cost_table else None

    def prepare(self, request_id: Hashable, prompt, params: SamplingParams | None, *, label: str = "request",
                field_names: dict[str, str] | None = None) -> Request:
        """The request layer's checks with this engine's tokenizer, vocabulary, EOS ids and max_seq_len."""
        cfg = self.target.cfg
        return prepare_request(request_id, prompt, params, tokenizer=self.tokenizer, vocab_size=cfg.vocab_size,
                               eos_token_ids=cfg.eos_token_ids, max_seq_len=self.max_seq_len, label=label,
                               field_names=field_names)

    def detokenize(self, token_ids: list[int]) -> str | None:
        return self.tokenizer.decode(token_ids, skip_special_tokens=True) if self.tokenizer is not None else None

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the engine for one generate/stream run: calls from other threads wait their turn; a second call from
        the thread that holds it (a stream() not yet finished) is refused instead of corrupting the first."""
        me = threading.get_ident()
        if self._lock_thread == me:
            raise RequestError("this engine is already running a stream() in this thread that has not finished: "
                               "iterate it to the end or close() it before the next generate()/stream() (or use "
                               "another engine)")
        with self._lock:
            self._lock_thread = me
            try:
                yield
            finally:
                self._lock_thread = None

    # ---- the loop ----------------------------------------------------------------------------------------------------

    def _run(self, prompts, params, verify_len, use_drafter, results, draft=None) -> Iterator[StepEvent]:
        plist = per_prompt_params(prompts, params)
        with self.exclusive():
            scheduler = self.new_scheduler(verify_len=verify_len, use_drafter=use_drafter, draft=draft)
            for i, (prompt, p) in enumerate(zip(prompts, plist)):  # every prompt checked before any work starts
                scheduler.add(i, prompt, p, label=f"prompt {i}")
            # Continuous batching: every prompt takes a slot as soon as one is free, up to max_batch_size at a time.
            while scheduler.has_work:
                for event in scheduler.step_iter():
                    if event.finished:
                        results[event.index] = event.result
                    yield event
            # One run's times, as one batch's were before: every result carries the run's total prefill / decode time.
            self._sync()
            for r in results:
                r.stats.prefill_s, r.stats.decode_s = scheduler.prefill_s, scheduler.decode_s

    def _sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
