"""Sampling parameters and the target's token choice.

Sampling uses Gumbel-max with counter-based noise: the noise for vocabulary entry v of the token at absolute position
p of a request is a hash of (seed, p, v). So the token the target samples at position p depends only on the prefix
and (seed, p) — not on the batch, the step, or how many drafts were verified with it. Two consequences:

* spec decoding is lossless in the strongest sense: for the same seed it emits exactly the tokens AR sampling emits
  (rejection sampling with a one-hot draft reduces to "accept while draft == target sample", and both paths draw
  the same sample at every position);
* a fused CUDA kernel can reproduce it with integer hashing and no softmax tensor.
"""

from __future__ import annotations

import math
import numbers
import secrets
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from dflash_trt.errors import RequestError

_U32 = 0xFFFFFFFF
SEED_MAX = 2**63 - 1  # seeds live in int64 device tensors: 0..2^63-1 (a larger UINT64 from a server is refused)


@dataclass
class SamplingParams:
    max_new_tokens: int = 128
    temperature: float = 0.0  # 0 = greedy
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1 = off
    seed: int | None = None  # None = a fresh random seed per request
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)
    ignore_eos: bool = False

    def validate(self, vocab_size: int | None = None, field_names: dict[str, str] | None = None) -> "SamplingParams":
        """One RequestError naming the field, for anything but the documented ranges: max_new_tokens an integer
        >= 1; temperature a finite number >= 0; top_k an integer >= 0; top_p a number in (0, 1]; seed None or an
        integer in 0..2^63-1 (SEED_MAX); stop_token_ids a list of token ids; ignore_eos a bool. `field_names` maps
        field names to what the caller's API calls them (a server's request fields), for the messages."""
        def name(f: str) -> str:
            return (field_names or {}).get(f, f"SamplingParams.{f}")

        if not _is_int(self.max_new_tokens) or self.max_new_tokens < 1:
            raise RequestError(f"{name('max_new_tokens')} must be an integer >= 1, got {self.max_new_tokens!r}")
        if not _is_real(self.temperature) or not 0 <= self.temperature < math.inf:
            raise RequestError(f"{name('temperature')} must be a finite number >= 0 (0 = greedy), got {self.temperature!r}")
        if not _is_int(self.top_k) or self.top_k < 0:
            raise RequestError(f"{name('top_k')} must be an integer >= 0 (0 = off), got {self.top_k!r}")
        if not _is_real(self.top_p) or not 0 < self.top_p <= 1:
            raise RequestError(f"{name('top_p')} must be in (0, 1] (1 = off), got {self.top_p!r}")
        if self.seed is not None and (not _is_int(self.seed) or not 0 <= self.seed <= SEED_MAX):
            raise RequestError(f"{name('seed')} must be None or an integer in 0..{SEED_MAX} (2^63 - 1), got {self.seed!r}")
        if isinstance(self.stop_token_ids, (str, bytes)) or not isinstance(self.stop_token_ids, (list, tuple)):
            raise RequestError(f"{name('stop_token_ids')} must be a list of token ids, got "
                               f"{type(self.stop_token_ids).__name__}")
        for t in self.stop_token_ids:
            if not _is_int(t) or t < 0 or (vocab_size is not None and t >= vocab_size):
                raise RequestError(f"{name('stop_token_ids')} has {t!r}, not a token id in 0..{(vocab_size or 0) - 1}")
        if not isinstance(self.ignore_eos, bool):
            raise RequestError(f"{name('ignore_eos')} must be true or false, got {self.ignore_eos!r}")
        return self

    def resolved_seed(self) -> int:
        return self.seed if self.seed is not None else secrets.randbits(63)


def _is_int(x) -> bool:
    """An integer, not a bool (True is an int in Python, never a token id or a count here)."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _is_real(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """murmur3's fmix32 on uint32 values held in int64 (products wrap mod 2^64; the low 32 bits stay exact)."""
    x = x & _U32
    x = x ^ (x >> 16)
    x = (x * 0x85EBCA6B) & _U32
    x = x ^ (x >> 13)
    x = (x * 0xC2B2AE35) & _U32
    return x ^ (x >> 16)


def seed_keys(seeds: torch.Tensor) -> torch.Tensor:
    """int64 seeds [N] -> 32-bit keys [N]."""
    return _mix32((seeds & _U32) ^ _mix32((seeds >> 32) + 0x9E3779B9))


def gumbel_noise(keys: torch.Tensor, positions: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Gumbel(0, 1) noise [N, K, V] from keys [N] and absolute positions [N, K]; float32."""
    row = _mix32(keys[:, None] ^ _mix32(positions * 0x27D4EB2D + 0x165667B1))  # [N, K]
    col = torch.arange(vocab_size, device=positions.device, dtype=torch.int64)
    h = _mix32(_mix32(row[..., None] + col) ^ (row[..., None] * 0x61C88647))  # [N, K, V]
    # 23-bit uniform strictly inside (0, 1): a 24-bit one rounds to 1.0 in float32 at the top value, giving +inf noise
    # that would beat even a filtered-out (-inf) token.
    u = ((h >> 9).to(torch.float32) + 0.5) * (1.0 / (1 << 23))
    return -torch.log(-torch.log(u))


class SamplingModes(NamedTuple):
    """What the host knows of a batch's sampling parameters, so that choosing the target's tokens reads nothing off
    the device: no host sync in the step, and nothing that stops torch.compile from tracing the step whole. Without
    it, `target_tokens` reads the same facts from the tensors."""

    sampled: bool  # some row has temperature > 0
    top_k_width: int  # the top-k filter's width (a row without top-k counts as the vocabulary); 0: no row uses top-k
    top_p: bool  # some row has top_p < 1

    @classmethod
    def of(cls, params: "list[tuple[float, int, float]]", vocab_size: int) -> "SamplingModes":
        """From each row's (temperature, top_k, top_p)."""
        uses_top_k = any(k > 0 for _, k, _ in params)
        width = max((min(k, vocab_size) if k > 0 else vocab_size for _, k, _ in params), default=0)
        return cls(any(t > 0 for t, _, _ in params), width if uses_top_k else 0, any(p < 1 for _, _, p in params))


GREEDY = SamplingModes(False, 0, False)


def _read_modes(temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor, vocab: int) -> SamplingModes:
    """SamplingModes read off the device (a host sync): what a caller that did not pass them gets."""
    return SamplingModes.of(list(zip(temperature.tolist(), top_k.tolist(), top_p.tolist())), vocab)


def filtered_scores(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
                    modes: SamplingModes | None = None) -> torch.Tensor:
    """float32 scores [N, K, V]: logits / T with entries outside top-k and the top-p nucleus set to -inf
    (same rules and order as transformers' warpers: temperature, then top-k, then top-p; ties at a cut are kept).
    modes: what the host knows of the rows (default: read off the tensors)."""
    scores = logits.float() / temperature.clamp_min(1e-6)[:, None, None]
    vocab = scores.shape[-1]
    if modes is None:
        modes = _read_modes(temperature, top_k, top_p, vocab)
    if modes.top_k_width:
        k = torch.where(top_k > 0, top_k.clamp_max(vocab), torch.full_like(top_k, vocab))
        kth = torch.topk(scores, modes.top_k_width, dim=-1).values.gather(
            -1, (k - 1)[:, None, None].expand(-1, scores.shape[1], 1))
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if modes.top_p:
        sorted_scores, _ = scores.sort(dim=-1, descending=True)
        probs = sorted_scores.softmax(-1)
        keep = (probs.cumsum(-1) - probs) < top_p[:, None, None]  # smallest prefix whose mass reaches top_p
        last_kept = keep.sum(-1, keepdim=True) - 1
        threshold = sorted_scores.gather(-1, last_kept)
        # Only rows that asked for top-p: on a top_p=1 row the float32 cumsum can reach 1.0 early and cut the tail.
        cut = (top_p < 1)[:, None, None] & (scores < threshold)
        scores = scores.masked_fill(cut, float("-inf"))
    return scores


def target_tokens(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
                  keys: torch.Tensor, positions: torch.Tensor, modes: SamplingModes | None = None) -> torch.Tensor:
    """The target's token at every verified position: logits [N, K, V] -> [N, K].

    Rows with temperature 0 take the argmax; the others a Gumbel-max sample keyed on (request key, position).
    modes: what the host knows of the rows (SamplingModes; default: read off the tensors, a host sync)."""
    greedy = logits.argmax(-1)
    if not (modes.sampled if modes is not None else bool((temperature > 0).any())):
        return greedy
    scores = filtered_scores(logits, temperature, top_k, top_p, modes)
    sampled = (scores + gumbel_noise(keys, positions, logits.shape[-1])).argmax(-1)
    return torch.where((temperature > 0)[:, None], sampled, greedy)
