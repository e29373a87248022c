"""block drafting around the drafter forward (torch reference).

prepare_block: the drafter's input `[last verified token, MASK x (B-1)]` at positions start..start+B-1.
drafts_to_verify_input: argmax of the drafter's logits for slots 1..K-1 -> the target's verify input
`[last token, drafts]` (K <= B: verifying a prefix of the block is allowed); drafts_to_verify adds the verify positions
(what the CUDA kernel returns).
"""

from __future__ import annotations

import torch


def prepare_block(last_tokens: torch.Tensor, starts: torch.Tensor, mask_token_id: int, block_size: int):
    """last_tokens [N], starts [N] (the position of the last token) -> (ids [N, B], positions [N, B])."""
    n = last_tokens.shape[0]
    ids = torch.full((n, block_size), mask_token_id, dtype=torch.long, device=last_tokens.device)
    ids[:, 0] = last_tokens
    positions = starts[:, None] + torch.arange(block_size, device=starts.device)
    return ids, positions


def drafts_to_verify_input(last_tokens: torch.Tensor, draft_logits: torch.Tensor):
    """draft_logits [N, K-1, V] (slots 1..K-1) -> (verify ids [N, K], drafts [N, K-1])."""
    drafts = draft_logits.argmax(-1)
    return torch.cat([last_tokens[:, None], drafts], dim=1), drafts


def drafts_to_verify(last_tokens: torch.Tensor, draft_logits: torch.Tensor, starts: torch.Tensor):
    """The drafts_to_verify kernel's reference: drafts_to_verify_input plus the verify positions starts + 0..k-1 (the
    last token sits at `start`) -> (verify ids [N, K], drafts [N, K-1], positions [N, K])."""
    verify_ids, drafts = drafts_to_verify_input(last_tokens, draft_logits)
    positions = starts[:, None] + torch.arange(verify_ids.shape[1], device=starts.device)
    return verify_ids, drafts, positions
