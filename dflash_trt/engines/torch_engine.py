"""The torch engine: DFlash speculative decoding (and plain AR) for a batch of prompts, on CPU or any CUDA GPU.

One speculative step for the active sequences (ragged: each sequence accepts its own number of drafts):
  1. block   [last token, MASK x (B-1)] at positions start..start+B-1            (kernels.block_draft)
  2. draft   drafter forward; new context = target features of last step's verified tokens; argmax -> drafts
  3. verify  target forward over [last token, drafts[:K-1]] with hidden-state taps
  4. accept  target token per slot (argmax / keyed sample), a = matching prefix, emit a + 1 tokens
             (cut at stop tokens / budget)                                         (kernels.sample_accept)
  5. book    target cache length = start + a + 1; the a + 1 verified tokens' features become the next context;
             the bonus token is the next step's last token
AR is the same loop with K = 1 and no drafter.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch

from dflash_trt import checkpoint as ckpt
from dflash_trt.errors import ConfigError, RequestError
from dflash_trt.kernels.block_draft import drafts_to_verify_input, prepare_block
from dflash_trt.kernels.sample_accept import sample_accept
from dflash_trt.models.drafter import DFlashDrafter
from dflash_trt.models.target import TargetModel
from dflash_trt.spec.sampling import SamplingParams, seed_keys
from dflash_trt.spec.stats import Stats


@dataclass
class Result:
    token_ids: list[int]  # generated tokens only
    text: str | None
    finish_reason: str  # "stop" (stop token / EOS emitted) or "length" (max_new_tokens)
    stats: Stats
    prompt_token_ids: list[int] = field(default_factory=list)


@dataclass
class StepEvent:
    """Tokens appended to one request by one step (what `stream` yields)."""

    index: int  # position of the request in the `prompts` passed in
    token_ids: list[int]
    finished: bool


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
                 max_batch_size: int = 8, max_seq_len: int = 2048):
        if max_batch_size < 1 or max_seq_len < 2:
            raise ConfigError(f"max_batch_size ({max_batch_size}) must be >= 1 and max_seq_len ({max_seq_len}) >= 2")
        self.target, self.drafter, self.tokenizer = target, drafter, tokenizer
        self.max_batch_size, self.max_seq_len = max_batch_size, max_seq_len
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
                        max_batch_size: int = 8, max_seq_len: int = 2048, tokenizer: bool = True) -> "TorchEngine":
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
        return cls(target, drafter, tok, max_batch_size=max_batch_size, max_seq_len=max_seq_len)

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
        spec = use_drafter and self.drafter is not None
        k = self._verify_len(block_size, spec)
        for lo in range(0, n, self.max_batch_size):
            hi = min(n, lo + self.max_batch_size)
            yield from self._run_batch(list(range(lo, hi)), encoded[lo:hi], plist[lo:hi], k, spec, results)

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

    @torch.inference_mode()
    def _run_batch(self, indices, encoded, plist, k, spec, results) -> Iterator[StepEvent]:
        dev, n = self.device, len(encoded)
        tgt = self.target
        slots = torch.arange(n, device=dev)
        t0 = time.perf_counter()

        # Per-request sampling state, as tensors so acceptance is vectorised across the batch.
        temperature = torch.tensor([float(p.temperature) for p in plist], device=dev)
        top_k = torch.tensor([p.top_k for p in plist], device=dev)
        top_p = torch.tensor([float(p.top_p) for p in plist], device=dev)
        keys = seed_keys(torch.tensor([p.resolved_seed() for p in plist], device=dev))
        stop_lists = [self._stop_ids(p) for p in plist]
        width = max(1, max(len(s) for s in stop_lists))
        stop_ids = torch.tensor([s + [-1] * (width - len(s)) for s in stop_lists], device=dev)
        outputs: list[list[int]] = [[] for _ in range(n)]
        budgets = [p.max_new_tokens for p in plist]
        stats = [Stats(block_size=k) for _ in range(n)]
        finish = ["length"] * n

        # ---- prefill: prompt into the target cache; its first token; its features are the first context ----------
        self.target_cache.reset()
        prompt_lens = [len(e) for e in encoded]
        longest = max(prompt_lens)
        ids = torch.zeros(n, longest, dtype=torch.long, device=dev)
        for i, e in enumerate(encoded):
            ids[i, : len(e)] = torch.tensor(e, device=dev)
        lens = torch.tensor(prompt_lens, device=dev)
        logits, features = tgt(ids, self.target_cache, slots, logits_at=(lens - 1)[:, None], tap=spec, max_length=longest)
        first = sample_accept(logits, torch.empty(n, 0, dtype=torch.long, device=dev), temperature, top_k, top_p,
                              keys, lens[:, None], stop_ids, torch.tensor(budgets, device=dev))
        self.target_cache.set_lengths(slots, lens)
        last = first.target_tokens[:, 0]
        if spec:
            self.drafter_cache.reset()
            context, context_counts = features, lens.clone()
        target_len_host = list(prompt_lens)
        drafter_len_host = [0] * n
        context_host = list(prompt_lens)
        first_tokens, first_done = last.tolist(), first.finished.tolist()
        self._sync()
        prefill_s = time.perf_counter() - t0
        active = []
        for i in range(n):
            outputs[i].append(first_tokens[i])
            if first_done[i]:
                finish[i] = "stop" if first_tokens[i] in stop_lists[i] else "length"
            else:
                active.append(i)
            yield StepEvent(indices[i], [first_tokens[i]], bool(first_done[i]))

        # ---- decode steps ------------------------------------------------------------------------------------------
        t1 = time.perf_counter()
        while active:
            act = torch.tensor(active, device=dev)
            starts = self.target_cache.lengths[act]
            last_act = last[act]
            if spec:
                d_max = max(drafter_len_host[i] + context_host[i] for i in active)
                drafts = self._draft(act, last_act, starts, k, context[act], context_counts[act], d_max)
                verify_ids = torch.cat([last_act[:, None], drafts], dim=1)
            else:
                verify_ids, drafts = last_act[:, None], torch.empty(len(active), 0, dtype=torch.long, device=dev)
            t_max = max(target_len_host[i] for i in active) + k
            logits, features = tgt(verify_ids, self.target_cache, act, tap=spec, max_length=t_max)
            positions = starts[:, None] + 1 + torch.arange(k, device=dev)  # slot j predicts position start + j + 1
            remaining = torch.tensor([budgets[i] - len(outputs[i]) for i in active], device=dev)
            res = sample_accept(logits, drafts, temperature[act], top_k[act], top_p[act], keys[act], positions,
                                stop_ids[act], remaining)
            self.target_cache.set_lengths(act, starts + res.accepted + 1)  # crop: keep last token + accepted drafts
            last[act] = res.target_tokens.gather(1, res.accepted[:, None])[:, 0]  # the bonus token
            if spec:
                if context.shape[1] != k:
                    context = torch.zeros(n, k, features.shape[-1], dtype=features.dtype, device=dev)
                context[act] = features  # the verified tokens' features; only the first accepted + 1 count
                context_counts[act] = res.accepted + 1
            host = torch.stack([res.accepted, res.num_emitted, res.finished.long()], 1).tolist()
            tokens_host = res.target_tokens.tolist()
            still = []
            for row, i in enumerate(active):
                accepted, emitted, done = host[row]
                new = tokens_host[row][:emitted]
                outputs[i].extend(new)
                stats[i].taus.append(accepted + 1)
                target_len_host[i] += accepted + 1
                drafter_len_host[i] += context_host[i]
                context_host[i] = accepted + 1
                if done:
                    finish[i] = "stop" if new and new[-1] in stop_lists[i] else "length"
                else:
                    still.append(i)
                yield StepEvent(indices[i], new, bool(done))
            active = still
        self._sync()
        decode_s = time.perf_counter() - t1

        for i in range(n):
            s = stats[i]
            s.new_tokens, s.prefill_s, s.decode_s = len(outputs[i]), prefill_s, decode_s
            text = self.tokenizer.decode(outputs[i], skip_special_tokens=True) if self.tokenizer is not None else None
            results[indices[i]] = Result(outputs[i], text, finish[i], s, encoded[i])


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
