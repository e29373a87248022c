"""The torch engine: DFlash speculative decoding (and plain AR) for a batch of prompts, on CPU or any CUDA GPU.

One speculative step for the active sequences (ragged: each sequence accepts its own number of drafts):
  1. block   [last token, MASK x (B-1)] at positions start..start+B-1            (kernels.block_draft)
  2. draft   drafter forward; new context = target features of last step's verified tokens; argmax -> drafts
  3. verify  target forward over [last token, drafts[:K-1]] with hidden-state taps
  4. accept  target token per slot (argmax / keyed sample), a = matching prefix, emit a + 1 tokens
             (cut at stop tokens / budget)                                         (kernels.sample_accept)
  5. book    target cache length = start + a + 1; the a + 1 verified tokens' features become the next context;
             the bonus token is the next step's last token
AR is the same loop with K = 1 and no drafter. The loop itself lives in engines/scheduler.py (BatchScheduler: requests
join free slots and leave at step boundaries); generate/stream run it with every prompt queued up front.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch

from dflash_trt import checkpoint as ckpt
from dflash_trt.errors import ConfigError, RequestError
from dflash_trt.kernels.block_draft import drafts_to_verify_input, prepare_block
from dflash_trt.models.drafter import DFlashDrafter
from dflash_trt.models.target import TargetModel
from dflash_trt.engines.scheduler import BatchScheduler, StepEvent
from dflash_trt.spec.sampling import SamplingParams
from dflash_trt.spec.stats import Stats


@dataclass
class Result:
    token_ids: list[int]  # generated tokens only
    text: str | None
    finish_reason: str  # "stop" (stop token / EOS emitted) or "length" (max_new_tokens)
    stats: Stats
    prompt_token_ids: list[int] = field(default_factory=list)


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


class TorchEngine:
    """Owns the target, the optional drafter, their pre-allocated KV caches and the tokenizer."""

    def __init__(self, target: TargetModel, drafter: DFlashDrafter | None = None, tokenizer=None, *,
                 max_batch_size: int = 8, max_seq_len: int = 2048, decode_loop: str = "host", steps_per_sync: int = 4):
        if max_batch_size < 1 or max_seq_len < 2:
            raise ConfigError(f"max_batch_size ({max_batch_size}) must be >= 1 and max_seq_len ({max_seq_len}) >= 2")
        if decode_loop not in ("host", "device"):
            raise ConfigError(f"decode_loop must be 'host' (one host read per step) or 'device' (steps_per_sync steps "
                              f"on the device per host read, CUDA graphs on GPU), got {decode_loop!r}")
        self.target, self.drafter, self.tokenizer = target, drafter, tokenizer
        self.max_batch_size, self.max_seq_len = max_batch_size, max_seq_len
        self.decode_loop, self.steps_per_sync = decode_loop, steps_per_sync
        self.device = target.lm_head.weight.device
        # Headroom past max_seq_len: a verify block and prefill padding write a few entries past the kept length.
        margin = drafter.block_size if drafter is not None else 1
        self.target_cache = target.new_cache(max_batch_size, max_seq_len + margin)
        if drafter is not None:
            target.tap_layer_ids = list(drafter.cfg.target_layer_ids)
            self.drafter_cache = drafter.new_cache(max_batch_size, max_seq_len + margin)

    @classmethod
    def from_pretrained(cls, target_dir: str | os.PathLike, drafter_dir: str | os.PathLike | None = None, *,
                        device: str | torch.device | None = None, dtype: str | torch.dtype | None = None,
                        max_batch_size: int = 8, max_seq_len: int = 2048, tokenizer: bool = True,
                        decode_loop: str = "host", steps_per_sync: int = 4) -> "TorchEngine":
        device = resolve_device(device)
        target_cfg = ckpt.load_target_config(target_dir)
        drafter_cfg = None
        if drafter_dir is not None:  # validate the pair before reading any weights
            drafter_cfg = ckpt.load_drafter_config(drafter_dir)
            ckpt.check_pair(target_cfg, drafter_cfg, drafter_dir)
        dtype = resolve_dtype(dtype, target_cfg.dtype)
        target = TargetModel.from_pretrained(target_dir, dtype, device, target_cfg)
        drafter = DFlashDrafter.from_pretrained(drafter_dir, dtype, device, drafter_cfg) if drafter_cfg else None
        tok = load_tokenizer(target_dir) if tokenizer else None
        return cls(target, drafter, tok, max_batch_size=max_batch_size, max_seq_len=max_seq_len, decode_loop=decode_loop,
                   steps_per_sync=steps_per_sync)

    # ---- public API --------------------------------------------------------------------------------------------------

    def generate(self, prompts: Sequence[str | Sequence[int]], params: SamplingParams | Sequence[SamplingParams] | None = None,
                 *, block_size: int | None = None, use_drafter: bool = True) -> list[Result]:
        """Generate for every prompt (text or token ids). `block_size` (K <= the drafter's B) sets how many block
        slots are verified; use_drafter=False (or no drafter) runs plain AR with the same engine."""
        results: list[Result | None] = [None] * len(prompts)
        for event in self._run(prompts, params, block_size, use_drafter, results):
            pass
        return results  # type: ignore[return-value]

    def stream(self, prompts: Sequence[str | Sequence[int]], params: SamplingParams | Sequence[SamplingParams] | None = None,
               *, block_size: int | None = None, use_drafter: bool = True) -> Iterator[StepEvent]:
        """Like generate, but yields the tokens each step appends to each request as they are accepted."""
        yield from self._run(prompts, params, block_size, use_drafter, [None] * len(prompts))

    # ---- request preparation -----------------------------------------------------------------------------------------

    def _encode(self, prompt: str | Sequence[int]) -> list[int]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise RequestError("a text prompt needs a tokenizer; the target directory has none: pass token ids")
            ids = list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        else:
            ids = [int(t) for t in prompt]
        vocab = self.target.cfg.vocab_size
        if not ids:
            raise RequestError("prompt is empty: give at least one token")
        if any(not 0 <= t < vocab for t in ids):
            raise RequestError(f"prompt has token ids outside the vocabulary 0..{vocab - 1}")
        return ids

    def _verify_len(self, block_size: int | None, spec: bool) -> int:
        if not spec:
            return 1
        limit = self.drafter.block_size
        k = limit if block_size is None else block_size
        if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= limit:
            raise RequestError(
                f"block_size must be an integer in 2..{limit} (2 = one draft per step, {limit} = the drafter's trained "
                f"block), got {block_size!r}; omit it to use {limit}"
            )
        return k

    def _stop_ids(self, p: SamplingParams) -> list[int]:
        stops = list(p.stop_token_ids)
        if not p.ignore_eos:
            stops += list(self.target.cfg.eos_token_ids)
        return list(dict.fromkeys(stops))

    # ---- the loop ----------------------------------------------------------------------------------------------------

    def _run(self, prompts, params, block_size, use_drafter, results) -> Iterator[StepEvent]:
        if isinstance(prompts, (str, bytes)):
            raise RequestError("prompts must be a list of prompts (wrap a single prompt in a list)")
        n = len(prompts)
        if params is None:
            params = SamplingParams()
        plist = list(params) if isinstance(params, (list, tuple)) else [params] * n
        if len(plist) != n:
            raise RequestError(f"got {n} prompts but {len(plist)} SamplingParams; pass one, or one per prompt")
        vocab = self.target.cfg.vocab_size
        for p in plist:
            p.validate(vocab)
        encoded = [self._encode(p) for p in prompts]
        for i, (ids, p) in enumerate(zip(encoded, plist)):
            if len(ids) + p.max_new_tokens > self.max_seq_len:
                raise RequestError(
                    f"prompt {i}: {len(ids)} prompt tokens + max_new_tokens {p.max_new_tokens} exceeds max_seq_len "
                    f"{self.max_seq_len}; shorten the prompt, lower max_new_tokens or raise max_seq_len"
                )
        scheduler = self.new_scheduler(block_size=block_size, use_drafter=use_drafter)
        for i, (ids, p) in enumerate(zip(encoded, plist)):
            scheduler.add(i, ids, p)
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

    def new_scheduler(self, *, block_size: int | None = None, use_drafter: bool = True) -> BatchScheduler:
        """The in-flight batch for this engine's decode loop: BatchScheduler (host loop) or DeviceLoopScheduler."""
        if self.decode_loop == "device":
            from dflash_trt.engines.device_loop import DeviceLoopScheduler

            return DeviceLoopScheduler(self, block_size=block_size, use_drafter=use_drafter,
                                       steps_per_sync=self.steps_per_sync)
        return BatchScheduler(self, block_size=block_size, use_drafter=use_drafter)

    def _draft(self, act, last_act, starts, k, context, counts, max_length) -> torch.Tensor:
        """Drafter forward for the active slots: appends their new context to the drafter cache and returns the
        argmax drafts for block slots 1..k-1 [m, k-1]."""
        drafter = self.drafter
        block_ids, block_pos = prepare_block(last_act, starts, drafter.mask_token_id, drafter.block_size)
        hidden = drafter(self.target.embed(block_ids), block_pos, context, counts, self.drafter_cache, act, max_length)
        self.drafter_cache.set_lengths(act, self.drafter_cache.lengths[act] + counts)
        return drafts_to_verify_input(last_act, self.target.logits(hidden[:, 1:k]))[1]

    def _sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def load_tokenizer(target_dir: str | os.PathLike):
    """transformers' AutoTokenizer from the target directory (local files only, no remote code); None if absent."""
    from pathlib import Path

    d = Path(target_dir)
    if not any((d / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")):
        return None
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(d), local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError) as err:
        raise ckpt.CheckpointError(f"target {d}: tokenizer files exist but cannot be loaded ({err}); fix or remove them") from None
