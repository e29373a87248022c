"""sample-and-accept: target logits + drafts -> accepted length, emitted tokens, finished flags (torch reference).

Acceptance (lossless for a one-hot draft): a = the longest prefix of drafts equal to the target's own tokens
(argmax at T=0, the target's sample at T>0). The step emits the target's tokens at positions 0..a, i.e. the a
accepted drafts plus one bonus token. A stop token among them truncates the emission right after it, as does the
request's remaining token budget.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from dflash_trt.spec.sampling import SamplingModes, target_tokens


class AcceptResult(NamedTuple):
    target_tokens: torch.Tensor  # [N, K] the target's token at every verified slot
    accepted: torch.Tensor  # [N] drafts accepted, 0..K-1 (τ = accepted + 1)
    num_emitted: torch.Tensor  # [N] tokens to append: accepted + 1, cut at a stop token or the budget
    finished: torch.Tensor  # [N] bool: a stop token was emitted or the budget is used up


def sample_accept(logits: torch.Tensor, drafts: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
                  top_p: torch.Tensor, keys: torch.Tensor, positions: torch.Tensor, stop_ids: torch.Tensor,
                  remaining: torch.Tensor, modes: SamplingModes | None = None) -> AcceptResult:
    """logits [N, K, V]; drafts [N, K-1]; per-row temperature/top_k/top_p/keys [N]; positions [N, K] (absolute
    position of the token each slot predicts); stop_ids [N, S] padded with -1; remaining [N] >= 1 token budget.
    modes: what the host knows of the rows' sampling parameters (spec.sampling.SamplingModes; default: read off the
    tensors, a host sync). The kernels take the same argument and need no such hint."""
    tokens = target_tokens(logits, temperature, top_k, top_p, keys, positions, modes)
    return accept_tokens(tokens, drafts, stop_ids, remaining)


def accept_tokens(tokens: torch.Tensor, drafts: torch.Tensor, stop_ids: torch.Tensor,
                  remaining: torch.Tensor) -> AcceptResult:
    """The acceptance rule alone, given the target's tokens [N, K]: matching prefix, stop-token and budget cuts."""
    k = tokens.shape[1]
    accepted = (drafts == tokens[:, :-1]).long().cumprod(1).sum(1)
    emit = accepted + 1
    slot = torch.arange(k, device=tokens.device)
    is_stop = (tokens[:, :, None] == stop_ids[:, None, :]).any(-1) & (slot[None, :] < emit[:, None])
    first_stop = torch.where(is_stop, slot[None, :], k).min(1).values
    hit_stop = first_stop < k
    emit = torch.where(hit_stop, first_stop + 1, emit)
    out_of_budget = emit >= remaining
    emit = torch.minimum(emit, remaining)
    return AcceptResult(tokens, accepted, emit, hit_stop | out_of_budget)
