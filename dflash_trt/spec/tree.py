"""Draft trees from the drafter's one pass (`--draft tree:N`).

The drafter predicts every block slot at once: slot d (1..B-1) gets a distribution p_d over the token at depth d.
A draft tree takes, instead of one argmax chain, the N - 1 most probable *path prefixes* under those marginals — the
best-first tree of DDTree / SpecInfer: a node is a path (t_1..t_d) from the root (the last verified token), its score
the drafter's joint log-probability sum_j log p_j(t_j), and the tree is the N best-scoring nodes (the root included).

Exact best-first without a heap, in fixed shapes: a path is a rank vector (r_1..r_d: the r_j-th most probable token
of depth j), and at least sum_{e<=d} prod_{j<=e} (r_j + 1) nodes score no lower than it (its prefixes, the paths of its
depth whose ranks are all <= its own, and their prefixes: log-probabilities are <= 0 and sorted per depth). Only paths
where that count is <= N - 1 can be chosen, a static set for (N, depths) (321 paths for N = 16 over 15 depths, 3,223
for N = 32). `build_tree` scores all of them at once (each path's joint log-probability, summed along its root path by
pointer doubling) and takes the N - 1 best with one top-k. Ties are broken by candidate order, shallower first, then
lexicographic ranks, which puts every node's dominators before it: a parent always precedes its children, the N best
are prefix-closed, and the result is deterministic. No host sync, no data-dependent shapes: capturable in a CUDA graph.

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


def tree_candidates(num_nodes: int, slots: int, vocab: int, device: torch.device | str) -> "_Candidates":
    """build_tree's static candidate set for `num_nodes` nodes over `slots` drafter slots and a `vocab`-token
    vocabulary (made once, cached). A caller that traces build_tree (torch.compile) makes it outside the traced code
    and passes it in: traced, its Python loops would be rebuilt into tensor constants at every call."""
    m = num_nodes - 1
    return _candidates(m, min(m, vocab), min(slots, m), torch.device(device))


def build_tree(draft_logits: torch.Tensor, root_tokens: torch.Tensor, num_nodes: int,
               cand: "_Candidates | None" = None) -> DraftTree:
    """draft_logits [n, D, V]: the drafter's logits for block slots 1..D; root_tokens [n] -> the best-first tree of
    `num_nodes` nodes (see the module docstring). Depth is at most min(D, num_nodes - 1). cand: tree_candidates(
    num_nodes, D, V, device), if the caller has it."""
    n, slots, vocab = draft_logits.shape
    dev = draft_logits.device
    m = num_nodes - 1  # nodes besides the root
    depths = min(slots, m)
    width = min(m, vocab)
    logp = draft_logits[:, :depths].float().log_softmax(-1)
    top_lp, top_tok = logp.topk(width, dim=-1)  # [n, depths, width], best first
    cand = cand if cand is not None else tree_candidates(num_nodes, slots, vocab, dev)
    flat_lp = torch.cat([top_lp.reshape(n, -1), torch.zeros(n, 1, device=dev)], 1)  # the last entry: padding (0)
    scores = flat_lp.index_select(1, cand.last)  # [n, C + 1]: each candidate's last log-probability (the root: 0) ...
    for jump in cand.jumps:  # ... summed along its root path by pointer doubling: its joint log-probability
        scores = scores + scores.index_select(1, jump)
    scores[:, 0] = float("inf")  # candidate 0, the root: always in
    # best first; ties in candidate order (shallower, then lexicographic ranks), which puts every node's dominators
    # (its prefixes, and the paths of its depth whose ranks are all <= its own) before it: the N best are prefix-closed.
    # One top-k over unique int64 keys (the score's order-preserving bits, then the candidate order): a stable sort
    # of 3,224 candidates per row cost 10x as much on CPU.
    bits = scores.view(torch.int32)
    key = (bits ^ ((bits >> 31) & 0x7FFFFFFF)).long() * (1 << 32) + cand.tiebreak
    chosen = key.topk(num_nodes, dim=1).indices  # [n, N]
    all_tokens = torch.cat([top_tok.reshape(n, -1), root_tokens[:, None].long()], 1).index_select(1, cand.last)
    index_of = torch.full((n, scores.shape[1]), -1, dtype=torch.long, device=dev)
    index_of.scatter_(1, chosen, torch.arange(num_nodes, device=dev).expand(n, -1))
    cand_parent = cand.parent[chosen]
    node_parents = torch.where(cand_parent >= 0, index_of.gather(1, cand_parent.clamp_min(0)), -1)
    on_path = index_of.gather(1, cand.path[chosen].reshape(n, -1)).reshape(n, num_nodes, -1)  # root .. itself
    ancestors = torch.zeros(n, num_nodes, num_nodes, dtype=torch.bool, device=dev)
    ancestors.scatter_(2, on_path, True)
    chain_depth = (index_of[:, cand.chain] >= 0).long().cumprod(1).sum(1)
    return DraftTree(all_tokens.gather(1, chosen), node_parents, cand.depth[chosen], ancestors, top_tok[:, :, 0],
                     chain_depth)


class _Candidates(NamedTuple):
    """The paths that can be among the m best nodes, as rank vectors (r_1..r_d: the r_j-th most probable token of
    depth j), candidate 0 being the root; index tensors over them."""

    last: torch.Tensor  # [C + 1] flat index (d * width + r_d) of the path's last token (the root: depths * width)
    jumps: torch.Tensor  # [rounds, C + 1] the ancestor 1, 2, 4, ... depths up (the root where there is none)
    tiebreak: torch.Tensor  # [C + 1] 2^32 - 1 - candidate index: earlier candidates first among equal scores
    parent: torch.Tensor  # [C + 1] the prefix's candidate index (-1: the root)
    depth: torch.Tensor  # [C + 1]
    path: torch.Tensor  # [C + 1, depths + 1] candidate indices of the root path: root, ..., itself (repeated past d)
    chain: torch.Tensor  # [depths] the argmax chain's candidates: ranks (0), (0, 0), ...


@functools.lru_cache(maxsize=64)
def _candidates(m: int, width: int, depths: int, device: torch.device) -> _Candidates:
    """Every path that can be among the m best: at least sum_{e<=d} prod_{j<=e} (r_j + 1) nodes score no lower than
    a path r of depth d and precede it in candidate order (the paths of depth e whose ranks are all <= r's first e),
    so only paths where that sum is <= m can be chosen (321 of them for m = 15 over 15 depths, 3,223 for m = 31).
    Static for (m, width, depths): scoring them all takes a few gathers, where a beam per depth took a sort per depth
    (build_tree on CPU: 0.63 -> 0.22 ms at n = 1, N = 16; 1.70 -> 1.04 ms at n = 8, N = 16; but at n = 8, N = 64 its
    28,496 candidates cost 4.8 -> 7-11 ms, 2 % of that tree:64 step, the one size where the beam was cheaper)."""
    levels: list[list[tuple[int, ...]]] = [[] for _ in range(depths)]

    def extend(ranks: tuple[int, ...], prod: int, used: int) -> None:
        if len(ranks) == depths:
            return
        for r in range(width):
            p = prod * (r + 1)
            if used + p > m:
                break
            child = ranks + (r,)
            levels[len(ranks)].append(child)
            extend(child, p, used + p)

    extend((), 1, 0)
    order = [path for level in levels for path in sorted(level)]
    index = {path: i + 1 for i, path in enumerate(order)}
    index[()] = 0
    last = [depths * width] + [(len(path) - 1) * width + path[-1] for path in order]
    parent = [-1] + [index[path[:-1]] for path in order]
    up = [max(x, 0) for x in parent]
    jumps = []
    for _ in range(max(depths, 1).bit_length()):
        jumps.append(up)
        up = [up[x] for x in up]
    depth = [0] + [len(path) for path in order]
    paths = [[0] * (depths + 1)] + [[index[path[:e]] for e in range(len(path) + 1)]
                                    + [index[path]] * (depths - len(path)) for path in order]
    chain = [index[(0,) * (d + 1)] for d in range(depths)]
    as_long = functools.partial(torch.tensor, dtype=torch.long, device=device)
    tiebreak = [(1 << 32) - 1 - i for i in range(len(order) + 1)]
    return _Candidates(as_long(last), as_long(jumps), as_long(tiebreak), as_long(parent), as_long(depth),
                       as_long(paths), as_long(chain))


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


def chain_equivalent(tree: DraftTree, path: torch.Tensor, accepted: torch.Tensor,
                     path_targets: torch.Tensor) -> torch.Tensor:
    """What the tree's argmax chain (the chain a chain draft verifies) shows of itself on this step: [n, 2] = (K, τ),
    a chain of K that accepted τ - 1 drafts (spec/budget.py's chain estimate learns from tree steps through it).
    path [n, W], accepted [n] and path_targets [n, W] (the target's token at each path node) are tree_accept's.

    τ - 1 = the accepted path's leading depths that follow the chain; K - 1 = how deep the step verified the chain:
    tree.chain_depth, the depth to which it lies inside the tree, and one depth more where the path followed the chain
    to its last node inside the tree — the target's token there is the verdict on the chain's next draft, which the
    tree does not hold. That depth is where the drafter was unsure enough to branch instead (why the chain left the
    tree), so it rejects more often than the chain's average: cut off at chain_depth instead, the chain's deep
    acceptance came out high while trees ran (a replay of 40 prompts, batch 1: tree:16's estimate 5.5 % above what
    it accepted, 1.7 % below with the extra depth; bench/results/2026-11-27-cpu-s20)."""
    width = path.shape[1]
    on_chain = tree.tokens.gather(1, path[:, 1:]) == tree.argmax[:, : width - 1]
    within = torch.arange(1, width, device=path.device)[None, :] <= accepted[:, None]
    follows = (on_chain & within).long().cumprod(1).sum(1)
    depth = tree.chain_depth  # (<= the tree's depth, width - 1)
    # the chain's node at chain_depth accepted (the path holds it) and the drafter drafted a depth past it
    known = (follows == depth) & (depth < tree.argmax.shape[1])
    nxt = tree.argmax.gather(1, depth.clamp_max(tree.argmax.shape[1] - 1)[:, None])[:, 0]
    hit = known & (path_targets.gather(1, depth[:, None])[:, 0] == nxt)
    return torch.stack([depth + 1 + known.long(), follows + 1 + hit.long()], 1)
