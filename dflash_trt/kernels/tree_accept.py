"""Tree acceptance and K/V compaction of a verified draft tree (torch references; spec/tree.py builds the tree).

tree_accept: the target verified every node of a draft tree in one forward and drew its token at each node (argmax
at T = 0, the request's keyed Gumbel sample at T > 0: the token AR would draw after that node's path). A node is
accepted when its token equals the target's token at its parent and its parent is accepted (the root always is).
Children of a node carry distinct tokens, so the accepted nodes form one root path; its length a is the accepted
drafts. The path is returned depth by depth ([n, W], W = the tree's depth + 1, past the path's end: its last node),
and the usual chain rule (`sample_accept.accept_tokens`) runs along it: the target's tokens at the path's nodes, the
path's drafts (-1 past the path, never equal), stop ids and budget -> the same AcceptResult a chain step gives, so
everything after verification (emission, bookkeeping, the drafter's next context) is the chain's.

compact_kv: node i's K/V was written at cache position start + i; the accepted path's node at depth d must end up at
start + d (root: already there). Gathered before scattered (a node's index is >= its depth, so in place each move
reads a position no earlier move of the same row wrote; the reference copies anyway). The padding past the path (its
last node repeated: along a real root path node indices strictly increase) is not copied: those positions lie past
the committed length start + a + 1, nothing reads them, and a copy there is only memory traffic.
"""

from __future__ import annotations

import torch

from dflash_trt.kernels.sample_accept import AcceptResult, accept_tokens


def tree_accept(node_tokens: torch.Tensor, parents: torch.Tensor, depth: torch.Tensor, target_tokens: torch.Tensor,
                stop_ids: torch.Tensor, remaining: torch.Tensor, width: int) -> tuple[torch.Tensor, AcceptResult]:
    """node_tokens/parents/depth [n, N] (spec/tree.py's DraftTree; parents before children), target_tokens [n, N] (the
    target's token at every node), stop_ids [n, S], remaining [n] >= 1, width = max depth + 1 ->
    (path [n, width] node index at each depth, AcceptResult along the path: target_tokens [n, width], ...)."""
    n, size = node_tokens.shape
    dev = node_tokens.device
    matches = (node_tokens == target_tokens.gather(1, parents.clamp_min(0))) | (parents < 0)
    accepted_node = matches.clone()
    # A node is accepted when it and all its ancestors match: pointer jumping, a fixed number of rounds (no loop over
    # nodes, no host sync): after round r a node has checked its ancestors up to 2^r - 1 levels up.
    hop = parents
    for _ in range((width - 1).bit_length()):
        valid = hop >= 0
        accepted_node = accepted_node & (~valid | accepted_node.gather(1, hop.clamp_min(0)))
        hop = torch.where(valid, hop.gather(1, hop.clamp_min(0)), -1)
    levels = torch.arange(width, device=dev)
    at_depth = accepted_node[:, None, :] & (depth[:, None, :] == levels[None, :, None])  # [n, width, N]
    on_path = at_depth.any(-1)
    nodes = torch.arange(size, device=dev)
    path = (at_depth.long() * nodes).sum(-1)  # one accepted node per depth, or none
    accepted = on_path.long().sum(1) - 1
    path = torch.where(on_path, path, path.gather(1, accepted[:, None]))
    tokens = target_tokens.gather(1, path)
    drafts = torch.where(on_path[:, 1:], node_tokens.gather(1, path[:, 1:]), -1)
    return path, accept_tokens(tokens, drafts, stop_ids, remaining)


def compact_kv(k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor, starts: torch.Tensor, path: torch.Tensor) -> None:
    """k, v [layers, max_slots, capacity, kv_heads, head_dim] (KVCache.k / .v); slots, starts [n]; path [n, W] ->
    position starts + d of each slot gets the K/V of position starts + path[:, d], in place, for the depths of the
    path proper (d = 0, or path[d] != path[d - 1]); the padding's positions keep what they held."""
    dst = starts[:, None] + torch.arange(path.shape[1], device=path.device)
    padding = torch.zeros_like(path, dtype=torch.bool)
    padding[:, 1:] = path[:, 1:] == path[:, :-1]
    src = torch.where(padding, dst, starts[:, None] + path)  # a padded depth copies its position onto itself
    rows = slots[:, None]
    for cache in (k, v):
        cache[:, rows, dst] = cache[:, rows, src]
