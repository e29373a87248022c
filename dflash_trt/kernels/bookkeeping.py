"""End-of-step bookkeeping of the spec loop (torch reference).

After sample-and-accept, a step (`SpecStep._step`, spec/step.py) updates per-slot state in four places:

* the target cache keeps the last token and the accepted drafts: ``lengths[slot] = start + accepted + 1``;
* the drafter cache commits the context it was fed this step (``lengths[slot] += context_counts[slot]``, the counts
  *before* this step's update);
* the features of the verified block become the next context: ``context[slot] = features`` of which only the first
  ``accepted + 1`` rows count, and ``context_counts[slot] = accepted + 1``;
* the bonus token becomes the next step's last token: ``last[slot] = target_tokens[row, accepted]``.

`commit_step` does all of them at the end of the step, in place; the CUDA kernel (plugins/src/bookkeeping.cuh) is
one launch for the same thing. Folding the drafter-length update into the end of the step is equivalent to doing it
right after the drafter forward: nothing in between reads the drafter cache lengths. Rows of the
context past ``accepted`` keep their old contents (the engine overwrites them with the rejected slots' features);
the drafter never reads them (it masks context positions at or past ``lengths + counts``).
"""

from __future__ import annotations

import torch


def commit_step(accepted: torch.Tensor, slots: torch.Tensor, starts: torch.Tensor, target_lengths: torch.Tensor,
                features: torch.Tensor | None = None, context: torch.Tensor | None = None,
                context_counts: torch.Tensor | None = None, drafter_lengths: torch.Tensor | None = None,
                target_tokens: torch.Tensor | None = None, last_tokens: torch.Tensor | None = None) -> None:
    """In place, for the n rows of a step (slots distinct):

    accepted [n] drafts accepted (0..k-1); slots [n] the rows' slots in the per-slot buffers; starts [n] the target
    cache length at the start of the step (the position of the step's last token); target_lengths [max_slots].
    Drafter group (all or none): features [n, k, F] the target's tap features of the verified block,
    context [max_slots, >= k, F] (same dtype), context_counts [max_slots], drafter_lengths [max_slots].
    Bonus-token pair (both or none): target_tokens [n, k], last_tokens [max_slots]."""
    kept = accepted + 1
    if drafter_lengths is not None:  # before context_counts changes: the previous step's context is now cached
        drafter_lengths[slots] = drafter_lengths[slots] + context_counts[slots].to(drafter_lengths.dtype)
    target_lengths[slots] = (starts + kept).to(target_lengths.dtype)
    if context is not None:
        k = features.shape[1]
        rows = torch.arange(k, device=features.device)[None, :] < kept[:, None]  # [n, k]: the first a + 1 slots
        context[slots, :k] = torch.where(rows[:, :, None], features.to(context.dtype), context[slots, :k])
    if context_counts is not None:
        context_counts[slots] = kept.to(context_counts.dtype)
    if last_tokens is not None:
        last_tokens[slots] = target_tokens.gather(1, accepted[:, None])[:, 0].to(last_tokens.dtype)
