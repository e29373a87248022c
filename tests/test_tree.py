"""Draft trees (`--draft tree:N`): the tree from the drafter's one pass, the target's tree-masked verify, the accepted
root path and its K/V compaction, and the losslessness of the whole step with trees.

* build_tree is exactly best-first (a brute-force heap over every path agrees) and its structure is consistent;
* a tree-masked target forward gives every node the logits a plain causal forward over its root path gives;
* tree_accept equals a plain walk down the tree; compact_kv leaves the cache as an AR run would have filled it;
* greedy tree:N output = AR token for token (random drafter, and a tree oracle whose right token is often only the
  drafter's second choice, so acceptance goes through side branches), batch 1 and a ragged batch of 4, window 1 and 4,
  references and kernels under emulation, stop tokens and budgets inside an accepted path;
* sampling: for the same seeds tree output = AR output; the chi-square distribution test with a tree, and its negative
  control (a lossy tree rule that trusts the drafter's first child) fails it.
"""

from __future__ import annotations

import heapq
import itertools

import numpy as np
import pytest
import torch

from dflash_trt import SamplingParams
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.errors import RequestError
from dflash_trt.kernels.ops import reference_ops
from dflash_trt.kernels.sample_accept import accept_tokens
from dflash_trt.kernels.tree_accept import compact_kv, tree_accept
from dflash_trt.spec.tree import MAX_TREE_NODES, build_tree, chain_equivalent, chain_tree, max_depth
from test_spec_lossless import (PROMPT, PROMPTS, SAMPLES, VOCAB, _chi_square_pvalue, _engine, _exact_joint,  # noqa: F401
                                _full_sequences, family_pair, step_variant)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---- the tree ----------------------------------------------------------------------------------------------------------

def _best_first(logp: np.ndarray, num_nodes: int) -> set[tuple[int, ...]]:
    """Reference best-first: a heap over paths scored by the summed log-probabilities; children of a popped node are
    every token at the next depth. Returns the paths (token tuples) of the N - 1 non-root nodes."""
    depths, vocab = logp.shape
    heap = [(-float(logp[0, v]), (v,)) for v in range(vocab)]
    heapq.heapify(heap)
    chosen = set()
    while len(chosen) < num_nodes - 1:
        neg, path = heapq.heappop(heap)
        chosen.add(path)
        if len(path) < depths:
            for v in range(vocab):
                heapq.heappush(heap, (neg - float(logp[len(path), v]), path + (v,)))
    return chosen


def _paths(tree, row: int) -> list[tuple[int, ...]]:
    tokens, parents = tree.tokens[row].tolist(), tree.parents[row].tolist()
    paths: list[tuple[int, ...]] = [()]
    for i in range(1, len(tokens)):
        paths.append(paths[parents[i]] + (tokens[i],))
    return paths


@pytest.mark.parametrize("num_nodes", [2, 3, 8, 20, 40])
def test_build_tree_is_best_first(num_nodes):
    g = torch.Generator().manual_seed(num_nodes)
    n, depths, vocab = 3, 5, 7
    logits = torch.randn(n, depths, vocab, generator=g) * 2
    root = torch.tensor([11, 12, 13])
    tree = build_tree(logits, root, num_nodes)
    assert tree.tokens.shape == (n, num_nodes) and bool((tree.tokens[:, 0] == root).all())
    logp = logits.log_softmax(-1).numpy()
    for b in range(n):
        parents, depth = tree.parents[b].tolist(), tree.depth[b].tolist()
        assert parents[0] == -1 and depth[0] == 0
        for i in range(1, num_nodes):
            assert 0 <= parents[i] < i and depth[i] == depth[parents[i]] + 1  # parents first, depth by one
            assert depth[i] <= i  # (compact_kv relies on it)
        paths = _paths(tree, b)
        assert len(set(paths)) == num_nodes  # no node twice: siblings carry distinct tokens
        assert set(paths[1:]) == _best_first(logp[b], num_nodes)
        anc = tree.ancestors[b]
        for i in range(num_nodes):  # ancestors: exactly the nodes on the root path, itself included
            on_path, j = {i}, i
            while parents[j] >= 0:
                j = parents[j]
                on_path.add(j)
            assert {j for j in range(num_nodes) if anc[i, j]} == on_path


@pytest.mark.parametrize("num_nodes", [2, 16, 32, 64])
def test_build_tree_under_exact_ties(num_nodes):
    """Equal scores everywhere (uniform marginals), and children that tie their parent (a token of probability 1:
    log-probability exactly 0): the tree is still prefix-closed with every parent first, the same on every call, and
    its scores best-first."""
    uniform = torch.zeros(2, 15, 40)
    certain = torch.full((2, 15, 40), -200.0)
    certain[:, ::2, 3] = 200.0  # every other depth: one token of probability 1 (the others exactly 0 in float32)
    for logits in (uniform, certain):
        tree = build_tree(logits, torch.tensor([5, 6]), num_nodes)
        again = build_tree(logits, torch.tensor([5, 6]), num_nodes)
        assert all(torch.equal(a, b) for a, b in zip(tree, again))
        logp = logits.log_softmax(-1)
        for b in range(2):
            parents, depth = tree.parents[b].tolist(), tree.depth[b].tolist()
            assert parents[0] == -1 and all(0 <= parents[i] < i and depth[i] == depth[parents[i]] + 1
                                            for i in range(1, num_nodes))
            paths = _paths(tree, b)
            assert len(set(paths)) == num_nodes
            scores = [float(sum(logp[b, j, t] for j, t in enumerate(path))) for path in paths[1:]]
            assert all(x >= y for x, y in zip(scores, scores[1:]))  # best first

def test_build_tree_depth_and_chain_limits():
    logits = torch.randn(2, 15, 50)
    root = torch.tensor([1, 2])
    # one very confident drafter: the tree of N nodes is the argmax chain when N <= depth + 1
    confident = torch.full((2, 15, 50), -30.0)
    confident[:, :, 7] = 30.0
    tree = build_tree(confident, root, 8)
    assert tree.depth[0].tolist() == list(range(8)) and tree.tokens[0, 1:].tolist() == [7] * 7
    big = build_tree(logits, root, MAX_TREE_NODES)
    assert int(big.depth.max()) <= 15
    assert max_depth(64, 16) == 15 and max_depth(5, 16) == 4
    assert torch.equal(chain_tree(torch.tensor([[4, 5, 6]])).ancestors[0].long(), torch.tril(torch.ones(3, 3)).long())


@pytest.mark.parametrize("num_nodes", [2, 6, 16, 40])
def test_argmax_chain_inside_the_tree(num_nodes):
    """chain_depth = how far the drafter's argmax chain can be walked inside the tree; chain_equivalent = (K, τ) of
    that chain on the step: τ - 1 = the accepted path's leading depths that follow it, K - 1 = chain_depth, plus one
    where the path holds the chain's last node inside the tree (the target's token there judges the chain's next
    draft: τ counts it if they are equal)."""
    g = torch.Generator().manual_seed(num_nodes)
    logits = torch.randn(8, 7, 9, generator=g)
    tree = build_tree(logits, torch.zeros(8, dtype=torch.long), num_nodes)
    width = max_depth(num_nodes, 8) + 1
    assert torch.equal(tree.argmax, logits[:, : width - 1].argmax(-1))
    target = torch.randint(0, 9, (8, num_nodes), generator=g)
    for b in range(8):  # rows 0-3: the target follows the argmax chain b depths, then a side branch; rows 4-7: the
        kids = {i: [c for c in range(num_nodes) if tree.parents[b, c] == i] for i in range(num_nodes)}
        node = 0  # whole chain inside the tree, then the chain's next draft (rows 4, 6) or another token (5, 7)
        for d in range(b if b < 4 else width - 1):
            nxt = [c for c in kids[node] if tree.tokens[b, c] == tree.argmax[b, d]]
            if not nxt:
                break
            target[b, node] = tree.argmax[b, d]
            node = nxt[0]
        else:
            if b < 4 and kids[node]:
                target[b, node] = tree.tokens[b, kids[node][-1]]
            continue
        if b >= 4:
            target[b, node] = tree.argmax[b, d] if b % 2 == 0 else (tree.argmax[b, d] + 1) % 9
        elif kids[node]:
            target[b, node] = tree.tokens[b, kids[node][-1]]
    path, res = tree_accept(tree.tokens, tree.parents, tree.depth, target, torch.full((8, 1), -1),
                            torch.full((8,), 99), width)
    got = chain_equivalent(tree, path, res.accepted, res.target_tokens)
    extended = hits = 0
    for b in range(8):
        node, depth = 0, 0  # walk the argmax chain in the tree
        while depth < width - 1:
            nxt = [c for c in range(num_nodes) if tree.parents[b, c] == node and tree.tokens[b, c] == tree.argmax[b, depth]]
            if not nxt:
                break
            node, depth = nxt[0], depth + 1
        assert int(tree.chain_depth[b]) == depth
        a = int(res.accepted[b])
        follows = 0
        while follows < a and int(tree.tokens[b, path[b, follows + 1]]) == int(tree.argmax[b, follows]):
            follows += 1
        known = follows == depth and depth < width - 1
        hit = known and int(target[b, node]) == int(tree.argmax[b, depth])
        extended, hits = extended + known, hits + hit
        assert got[b].tolist() == [depth + 1 + known, follows + 1 + hit]
    if num_nodes > 2:  # (tree:2 is one node deep: its chain never leaves it within the drafts)
        assert 0 < hits < extended
    chain = chain_tree(torch.tensor([[0, 3, 4, 5]]))
    assert int(chain.chain_depth[0]) == 3
    _, r = tree_accept(chain.tokens, chain.parents, chain.depth, torch.tensor([[3, 4, 7, 1]]), torch.full((1, 1), -1),
                       torch.tensor([9]), 4)
    assert int(r.accepted[0]) == 2 and chain_equivalent(chain, _, r.accepted, r.target_tokens)[0].tolist() == [4, 3]


# ---- the target's tree verify ------------------------------------------------------------------------------------------

def test_tree_verify_equals_causal_forward_per_path(make_pair):
    """Each node's logits and taps from one tree-masked forward = a causal forward over the node's root path; the
    K/V the tree writes at the accepted path, once compacted, = the K/V a causal forward writes."""
    target_dir, drafter_dir = make_pair(family="qwen3", vocab_size=64, seed=5)
    engine = TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=4,
                                         max_seq_len=64)
    target = engine.target
    target.tap_layer_ids = list(engine.drafter.cfg.target_layer_ids)
    prompts = [[3, 9, 4, 22, 8], [5, 6], [40, 41, 42]]
    slots = torch.tensor([2, 0, 3])
    g = torch.Generator().manual_seed(1)
    tree = build_tree(torch.randn(3, 6, 64, generator=g), torch.tensor([p[-1] for p in prompts]), 12)
    cache = target.new_cache(4, 64)
    with torch.inference_mode():
        for slot, p in zip(slots.tolist(), prompts):  # the prompts minus their last token into the cache
            s = torch.tensor([slot])
            target(torch.tensor([p[:-1]]), cache, s)
            cache.set_lengths(s, torch.tensor([len(p) - 1]))
        logits, feats = target(tree.tokens, cache, slots, tap=True, tree=(tree.depth, tree.ancestors))
        for row, p in enumerate(prompts):
            for i, path in enumerate(_paths(tree, row)):
                seq = p + list(path)
                ref_cache = target.new_cache(1, 64)
                ref_logits, ref_feats = target(torch.tensor([seq]), ref_cache, torch.tensor([0]), tap=True)
                torch.testing.assert_close(logits[row, i], ref_logits[0, -1], atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(feats[row, i], ref_feats[0, -1], atol=1e-5, rtol=1e-5)
        # a path of depth 3 in row 0 (if the tree has one), compacted into place
        depth = tree.depth[0].tolist()
        leaf = max(range(len(depth)), key=lambda i: (depth[i], -i))
        chain, j = [], leaf
        while j >= 0:
            chain.append(j)
            j = tree.parents[0, j].item()
        path = torch.tensor(chain[::-1])[None]
        starts = cache.lengths[slots[:1]]
        compact_kv(cache.k, cache.v, slots[:1], starts, path)
        seq = prompts[0] + list(_paths(tree, 0)[leaf])
        ref_cache = target.new_cache(1, 64)
        target(torch.tensor([seq]), ref_cache, torch.tensor([0]))
        upto = len(seq)
        torch.testing.assert_close(cache.k[:, 2, :upto], ref_cache.k[:, 0, :upto], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(cache.v[:, 2, :upto], ref_cache.v[:, 0, :upto], atol=1e-5, rtol=1e-5)


# ---- acceptance ---------------------------------------------------------------------------------------------------------

def _walk(tokens, parents, target, stops, remaining, width):
    """The plain rule: from the root, go to the child whose token is the target's token here, while there is one."""
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parents):
        children.setdefault(p, []).append(i)
    path = [0]
    while True:
        nxt = [c for c in children.get(path[-1], []) if tokens[c] == target[path[-1]]]
        if not nxt:
            break
        assert len(nxt) == 1
        path.append(nxt[0])
    accepted = len(path) - 1
    emitted = [target[i] for i in path]
    cut = next((i + 1 for i, t in enumerate(emitted) if t in stops), None)
    emit = cut if cut is not None else accepted + 1
    finished = cut is not None or emit >= remaining
    return path + [path[-1]] * (width - len(path)), accepted, min(emit, remaining), finished


@pytest.mark.parametrize("seed", range(6))
def test_tree_accept_equals_a_walk(seed):
    g = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    n, vocab, nodes = 8, 6, [5, 16, 33][seed % 3]
    tree = build_tree(torch.randn(n, 7, vocab, generator=g), torch.zeros(n, dtype=torch.long), nodes)
    width = max_depth(nodes, 8) + 1
    # target tokens that follow the tree for a while: at each node, the token of a random child or a random token
    target = torch.randint(0, vocab, (n, nodes), generator=g)
    for b, i in itertools.product(range(n), range(nodes)):
        kids = [c for c in range(nodes) if tree.parents[b, c] == i]
        if kids and rng.random() < 0.8:
            target[b, i] = tree.tokens[b, kids[rng.integers(len(kids))]]
    stops = torch.full((n, 3), -1)
    stops[::3, 0] = 2
    remaining = torch.tensor(rng.integers(1, 9, n))
    path, res = tree_accept(tree.tokens, tree.parents, tree.depth, target, stops, remaining, width)
    for b in range(n):
        want_path, accepted, emit, finished = _walk(tree.tokens[b].tolist(), tree.parents[b].tolist(),
                                                    target[b].tolist(), set(stops[b].tolist()) - {-1},
                                                    int(remaining[b]), width)
        assert path[b].tolist() == want_path
        assert (int(res.accepted[b]), int(res.num_emitted[b]), bool(res.finished[b])) == (accepted, emit, finished)
        assert res.target_tokens[b].tolist() == target[b, want_path].tolist()
    assert int(res.accepted.max()) >= 2  # the draw exercised real paths


def test_tree_accept_on_a_chain_is_the_chain_rule():
    g = torch.Generator().manual_seed(3)
    drafts = torch.randint(0, 4, (16, 7), generator=g)
    tokens = torch.cat([torch.zeros(16, 1, dtype=torch.long), drafts], 1)
    target = torch.randint(0, 4, (16, 8), generator=g)
    stops, remaining = torch.full((16, 1), 3), torch.full((16,), 6)
    tree = chain_tree(tokens)
    _, res = tree_accept(tree.tokens, tree.parents, tree.depth, target, stops, remaining, 8)
    want = accept_tokens(target, drafts, stops, remaining)
    for a, b in zip(res[1:], want[1:]):  # accepted, num_emitted, finished
        assert torch.equal(a, b)
    kept = torch.arange(8)[None, :] <= want.accepted[:, None]  # along the path; past it the path repeats its end
    assert torch.equal(res.target_tokens[kept], want.target_tokens[kept])
    assert int(want.accepted.max()) >= 1


# ---- the step with trees: lossless ---------------------------------------------------------------------------------------

def make_tree_oracle(engine: TorchEngine, continuations: list[list[int]], seed: int = 0) -> TorchEngine:
    """The drafter still runs, but its logits are replaced: at each block slot the true continuation is the drafter's
    first choice (p 0.45), its second behind a wrong first (p 0.35) or far down (p 0.2). A chain then stops at every
    wrong first choice; a tree recovers the second choices."""
    step = engine.step_runner
    real = step.draft_logits
    rng = np.random.default_rng(seed)
    vocab = engine.target.cfg.vocab_size

    def draft_logits(rows, last, starts, counts, k, upto):
        logits = real(rows, last, starts, counts, k, upto)
        fake = torch.zeros_like(logits)
        for row, slot in enumerate(rows.tolist()):
            full = continuations[slot]
            for j in range(logits.shape[1]):
                pos = int(starts[row]) + 1 + j
                truth = full[pos] if pos < len(full) else 0
                wrong = (truth + 1 + int(rng.integers(vocab - 1))) % vocab
                u = rng.random()
                if u < 0.45:
                    fake[row, j, truth] = 8.0
                elif u < 0.8:
                    fake[row, j, wrong], fake[row, j, truth] = 8.0, 7.0
                else:
                    fake[row, j, wrong], fake[row, j, truth] = 8.0, -8.0
        return fake

    step.draft_logits = draft_logits
    return engine


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("nodes", [3, 12, 40])
def test_greedy_tree_equals_ar(family_pair, step_variant, batch, nodes):
    engine = _engine(family_pair, step_variant)
    prompts = PROMPTS[:batch]
    params = SamplingParams(max_new_tokens=40, ignore_eos=True)
    ar = engine.generate(prompts, params, use_drafter=False)
    spec = engine.generate(prompts, params, draft=f"tree:{nodes}")
    assert [s.token_ids for s in spec] == [a.token_ids for a in ar]
    assert all(1 <= t <= max_depth(nodes, 16) + 1 for s in spec for t in s.stats.taus)

    oracle = make_tree_oracle(_engine(family_pair, step_variant), _full_sequences(prompts, ar))
    tree = oracle.generate(prompts, params, draft=f"tree:{nodes}")
    assert [s.token_ids for s in tree] == [a.token_ids for a in ar]
    chain_oracle = make_tree_oracle(_engine(family_pair, step_variant), _full_sequences(prompts, ar))
    chain = chain_oracle.generate(prompts, params, draft=f"chain:{min(nodes, 16)}")
    assert [s.token_ids for s in chain] == [a.token_ids for a in ar]
    tau_tree = np.mean([t for s in tree for t in s.stats.taus])
    tau_chain = np.mean([t for s in chain for t in s.stats.taus])
    if nodes >= 12:  # side branches accepted: the tree beats the chain on the same drafter
        assert tau_tree > 1.3 * tau_chain
    if batch > 1:
        per_step = [s.stats.taus for s in tree]
        assert any(len({steps[i] for steps in per_step if i < len(steps)}) > 1 for i in range(8))


@pytest.mark.parametrize("max_new_tokens", [1, 3, 11])
def test_tree_stop_and_budget_inside_a_path(family_pair, step_variant, max_new_tokens):
    engine = _engine(family_pair, step_variant)
    free = engine.generate(PROMPTS, SamplingParams(max_new_tokens=30, ignore_eos=True), use_drafter=False)
    stops = tuple(sorted({r.token_ids[7] for r in free}))
    for params in (SamplingParams(max_new_tokens=30, ignore_eos=True, stop_token_ids=stops),
                   SamplingParams(max_new_tokens=max_new_tokens, ignore_eos=True)):
        ar = engine.generate(PROMPTS, params, use_drafter=False)
        oracle = make_tree_oracle(_engine(family_pair, step_variant), _full_sequences(PROMPTS, free), seed=2)
        tree = oracle.generate(PROMPTS, params, draft="tree:24")
        for a, s in zip(ar, tree):
            assert s.token_ids == a.token_ids and s.finish_reason == a.finish_reason


def test_sampling_same_seed_tree_equals_ar(family_pair, step_variant):
    engine = _engine(family_pair, step_variant)
    params = [SamplingParams(max_new_tokens=32, temperature=t, top_k=k, top_p=p, seed=s, ignore_eos=True)
              for s, (t, k, p) in enumerate([(1.0, 0, 1.0), (0.7, 20, 1.0), (1.3, 0, 0.9), (0.0, 0, 1.0)])]
    ar = engine.generate(PROMPTS, params, use_drafter=False)
    oracle = make_tree_oracle(_engine(family_pair, step_variant), _full_sequences(PROMPTS, ar), seed=1)
    tree = oracle.generate(PROMPTS, params, draft="tree:16")
    assert [s.token_ids for s in tree] == [a.token_ids for a in ar]
    assert np.mean([t for s in tree for t in s.stats.taus]) > 2


# ---- distribution ------------------------------------------------------------------------------------------------------

def _tree_samples(engine, params: SamplingParams, draft: str) -> np.ndarray:
    plist = [SamplingParams(**{**params.__dict__, "seed": 20_000 + s}) for s in range(SAMPLES)]
    results = engine.generate([PROMPT] * SAMPLES, plist, draft=draft)
    # t3 comes from a tree node whenever t2 is one of the root's children: about a third of the samples here
    assert np.mean([t for r in results for t in r.stats.taus]) > 1.2
    return np.array([r.token_ids[:3] for r in results])


def _trusting_rule():
    """A lossy tree rule: at each node, half the time take the drafter's first child as the target's token."""

    def rule(node_tokens, parents, depth, target_tokens, stop_ids, remaining, width):
        n, size = node_tokens.shape
        first_child = torch.full((n, size), -1, dtype=torch.long)
        for i in reversed(range(1, size)):  # the lowest-index child of each node: the drafter's favourite
            p = parents[:, i]
            first_child[torch.arange(n), p.clamp_min(0)] = torch.where(p >= 0, node_tokens[:, i],
                                                                        first_child[torch.arange(n), p.clamp_min(0)])
        coin = torch.rand(n, size) < 0.5
        trusted = torch.where(coin & (first_child >= 0), first_child, target_tokens)
        return tree_accept(node_tokens, parents, depth, trusted, stop_ids, remaining, width)

    return rule


@pytest.mark.parametrize("window", [1, 4])
def test_tree_sampling_matches_target_distribution(make_pair, window):
    target_dir, drafter_dir = make_pair(family="qwen3", vocab_size=VOCAB, seed=7)
    engine = TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=2000,
                                         max_seq_len=32, decode_loop="device" if window > 1 else "host",
                                         steps_per_sync=window, ops=reference_ops())
    params = SamplingParams(max_new_tokens=3, temperature=1.0, ignore_eos=True)
    joint = _exact_joint(engine, params)
    tokens = _tree_samples(engine, params, "tree:8")
    assert _chi_square_pvalue(tokens, joint) > 1e-3
    if window == 1:  # the negative control: the same test fails a lossy tree rule
        wrong = TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False,
                                            max_batch_size=2000, max_seq_len=32,
                                            ops=reference_ops()._replace(tree_accept=_trusting_rule()))
        assert _chi_square_pvalue(_tree_samples(wrong, params, "tree:8"), joint) < 1e-6


# ---- interface ---------------------------------------------------------------------------------------------------------

def test_tree_draft_spec_is_checked(make_pair):
    target_dir, drafter_dir = make_pair(family="qwen3", vocab_size=64, seed=5)
    engine = TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=2,
                                         max_seq_len=64)
    for bad, words in [("tree:1", "2..64 nodes"), (f"tree:{MAX_TREE_NODES + 1}", "2..64 nodes"),
                       ("tree:x", "'tree:N'")]:
        with pytest.raises(RequestError, match=words):
            engine.generate([[1, 2]], SamplingParams(max_new_tokens=4), draft=bad)
    with pytest.raises(RequestError, match="not both"):
        engine.generate([[1, 2]], SamplingParams(max_new_tokens=4), draft="tree:8", verify_len=4)
    out = engine.generate([[1, 2]], SamplingParams(max_new_tokens=4), draft="tree:64")
    assert len(out[0].token_ids) == 4 and out[0].stats.ks == [64] * len(out[0].stats.taus)

