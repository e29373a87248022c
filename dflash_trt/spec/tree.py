"""Draft trees from the drafter's one pass (`--draft tree:N`).

The drafter predicts every block slot at once: slot d (1..B-1) gets a distribution p_d over the token at depth d.
A draft tree takes, instead of one argmax chain, the N - 1 most probable *path prefixes* under those marginals — the
best-first tree of DDTree / SpecInfer: a node is a path (t_1..t_d) from the root (the last verified token), its score
the drafter's joint log-probability sum_j log p_j(t_j), and the tree is the N best-scoring nodes (the root included).

Exact best-first without a heap: a child never scores above its parent (log-probabilities are <= 0), so the N best
nodes are prefix-closed, and every one of them is among the N - 1 best nodes *of its own depth*. `build_tree` therefore
keeps a beam of the N - 1 best paths per depth (the children of depth d's beam, from each slot's top-(N-1) tokens,
re-ranked), then takes the N - 1 best over all depths. Ties are broken by a stable sort: shallower nodes first, then
the order within a depth (parent rank, then child rank), so a parent always precedes its children and the result is
deterministic. Everything is tensor ops over the batch with fixed shapes: no host sync, capturable in a CUDA graph.

Nodes come out in that order (root first, every parent before its children): `tokens`, `parents` (-1 for the root),
`depth` (root 0) and `ancestors` [n, N, N] (node j is node i or one of its ancestors). The target verifies the N
nodes in one forward: node i's K/V is written at cache position start + i, its RoPE position is start + depth[i], and it
attends to the cache before start and to its ancestors (the tree attention mask). `kernels.tree_accept` then finds
the accepted root path and moves its K/V into place.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch

MAX_TREE_NODES = 64  # the largest N of tree:N (the cache keeps this much headroom past max_seq_len per slot)


class DraftTree(NamedTuple):
    tokens: torch.Tensor  # [n, N] node tokens; node 0 = the root (the last verified token)
    parents: torch.Tensor  # [n, N] parent node index, -1 for the root
    depth: torch.Tensor  # [n, N] 0 for the root
    ancestors: torch.Tensor  # [n, N, N] bool: ancestors[b, i, j] = node j is node i or an ancestor of it
    argmax: torch.Tensor  # [n, D] the drafter's argmax token per depth: the chain a chain draft would verify
    chain_depth: torch.Tensor  # [n] how deep that argmax chain lies inside the tree


def max_depth(num_nodes: int, block_size: int) -> int:
    """The deepest node a tree of N nodes over a drafter block B can have."""
    return min(num_nodes - 1, block_size - 1)


def build_tree(draft_logits: torch.Tensor, root_tokens: torch.Tensor, num_nodes: int) -> DraftTree:
    """draft_logits [n, D, V]: the drafter's logits for block slots 1..D; root_tokens [n] -> the best-first tree of
    `num_nodes` nodes (see the module docstring). Depth is at most min(D, num_nodes - 1)."""
    n, slots, vocab = draft_logits.shape
    dev = draft_logits.device
    m = num_nodes - 1  # nodes besides the root
    depths = min(slots, m)
    width = min(m, vocab)
    logp = draft_logits[:, :depths].float().log_softmax(-1)
    top_lp, top_tok = logp.topk(width, dim=-1)  # [n, depths, width], best first
    # Per depth: a beam of (score, token, parent candidate index) — candidates numbered over all depths, root = 0.
    scores = [torch.zeros(n, 1, device=dev)]
    tokens = [root_tokens[:, None].long()]
    parents = [torch.full((n, 1), -1, dtype=torch.long, device=dev)]
    offset, beam = 0, scores[0]
    firsts = []  # each depth's best candidate: the argmax chain's node there (the best parent's best child)
    for d in range(depths):
        parent_rank, child_rank = _pairs(beam.shape[1], width, m, dev)
        cand = beam.index_select(1, parent_rank) + top_lp[:, d].index_select(1, child_rank)  # [n, pairs]
        keep = min(m, cand.shape[1])
        order = torch.sort(cand, dim=1, descending=True, stable=True).indices[:, :keep]
        beam = cand.gather(1, order)
        scores.append(beam)
        tokens.append(top_tok[:, d].gather(1, child_rank.take(order)))
        parents.append(parent_rank.take(order) + offset)
        offset += scores[-2].shape[1]
        firsts.append(offset)
    all_scores = torch.cat(scores, 1)
    all_scores[:, 0] = float("inf")  # the root is always in the tree
    all_tokens, all_parents = torch.cat(tokens, 1), torch.cat(parents, 1)
    all_depth = torch.cat([torch.full_like(t, d) for d, t in enumerate(tokens)], 1)
    chosen = torch.sort(all_scores, dim=1, descending=True, stable=True).indices[:, :num_nodes]  # [n, N]
    index_of = torch.full_like(all_tokens, -1).scatter_(1, chosen, torch.arange(num_nodes, device=dev).expand(n, -1))
    cand_parent = all_parents.gather(1, chosen)
    node_parents = torch.where(cand_parent >= 0, index_of.gather(1, cand_parent.clamp_min(0)), -1)
    depth = all_depth.gather(1, chosen)
    chain_depth = (index_of[:, firsts] >= 0).long().cumprod(1).sum(1)
    return DraftTree(all_tokens.gather(1, chosen), node_parents, depth, ancestors_of(node_parents, depths),
                     top_tok[:, :, 0], chain_depth)


@functools.lru_cache(maxsize=256)
def _pairs(beam: int, width: int, m: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(parent rank b, child rank r) pairs, parent-major, that can be among the m best children of a beam sorted best
    first: (b + 1)(r + 1) <= m (every pair (b' <= b, r' <= r) scores at least as high and sorts before it)."""
    pairs = [(b, r) for b in range(beam) for r in range(width) if (b + 1) * (r + 1) <= m]
    t = torch.tensor(pairs, dtype=torch.long, device=device)
    return t[:, 0].contiguous(), t[:, 1].contiguous()


def ancestors_of(parents: torch.Tensor, max_depth: int) -> torch.Tensor:
    """parents [n, N] (-1 for the root) -> [n, N, N] bool, node j is node i or an ancestor of it: reachability by
    repeated squaring of the parent relation, ceil(log2(max_depth + 1)) rounds (a fixed count: no host sync)."""
    n, size = parents.shape
    eye = torch.eye(size, device=parents.device)
    reach = eye.expand(n, -1, -1).clone()
    reach.scatter_add_(2, parents.clamp_min(0)[..., None], (parents >= 0).float()[..., None])
    for _ in range(max(max_depth, 1).bit_length()):
        reach = (torch.bmm(reach, reach) > 0).float()
    return reach > 0


def chain_tree(tokens: torch.Tensor) -> DraftTree:
    """A chain [last, d_1, .., d_{K-1}] as a tree (each node the child of the one before): for tests and comparisons."""
    n, k = tokens.shape
    dev = tokens.device
    parents = (torch.arange(k, device=dev) - 1).expand(n, -1).clone()
    depth = torch.arange(k, device=dev).expand(n, -1).clone()
    return DraftTree(tokens, parents, depth, ancestors_of(parents, k - 1), tokens[:, 1:],
                     torch.full((n,), k - 1, device=dev))


def chain_equivalent(tree: DraftTree, path: torch.Tensor, accepted: torch.Tensor) -> torch.Tensor:
    """How many drafts the tree's argmax chain (the chain a chain draft verifies) would have accepted on this step:
    the leading depths of the accepted path that follow it. [n]; it could verify tree.chain_depth of them, so a value
    equal to chain_depth says nothing of the next depth (what spec/budget.py's chain estimate learns from tree steps)."""
    width = path.shape[1]
    on_chain = tree.tokens.gather(1, path[:, 1:]) == tree.argmax[:, : width - 1]
    within = torch.arange(1, width, device=path.device)[None, :] <= accepted[:, None]
    return (on_chain & within).long().cumprod(1).sum(1)
