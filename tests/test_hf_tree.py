"""Draft trees (`--draft tree:N`) on targets run by their own transformers modules (models/hf_target.py): gpt-oss,
Qwen3-MoE and Gemma 4 text, on test_families.py's tiny random models (hidden 64, 4 layers, vocab 512, float32; sliding
window 8 on gpt-oss and Gemma 4, whose layers alternate sliding / full; Gemma 4's last two layers share K/V; every
prompt longer than the window):

* one tree-masked forward gives every node the logits and taps transformers itself gives the node's root path (a causal
  forward, no cache), including nodes deeper than the sliding window, whose window leaves out the tree's root and
  part of its own path; the accepted path's K/V, compacted through `kv_stores()`, = a causal forward's K/V;
* greedy tree:5 and tree:24 = transformers' greedy generate token for token, for a ragged batch: with the random
  drafter, and with test_tree's oracle (the right token often only the drafter's second choice), where the tree's
  mean τ beats the chain's on the same oracle; the device loop (windows of 4 steps, rows finishing inside them); auto,
  which now measures and considers trees on these targets;
* a hybrid target (Qwen3.5: linear-attention layers, whose recurrent state cannot follow a tree's branches) still
  refuses trees: one RequestError before anything runs (chains still work), and its forward refuses a tree.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dflash_trt import SamplingParams
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.errors import RequestError
from dflash_trt.kernels.tree_accept import compact_kv
from dflash_trt.models.hf_target import HfTarget
from dflash_trt.models.target import load_target
from dflash_trt.spec.budget import AUTO_TREES, Draft
from dflash_trt.spec.tree import MAX_TREE_NODES, build_tree, max_depth
import test_families
from test_families import (LAYERS, NEW_TOKENS, VOCAB, WINDOW, _features_of, assert_ragged_in_one_step,
                           check_ragged_budgets, close, family_pair, hf_greedy, prompts, reference)
from test_tree import _paths, make_tree_oracle

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TREE_FAMILIES = ["gpt_oss", "qwen3_moe", "gemma4"]
BLOCK = 16  # test_families' drafters


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    test_families._CACHE.clear()  # paths another module made (its tmp dir) are not ours
    return tmp_path_factory.mktemp("hf_tree")


def teardown_module(module):
    test_families._CACHE.clear()


def _two_choice_tree(roots: torch.Tensor, gaps: torch.Tensor, nodes: int, seed: int):
    """A draft tree over drafter logits with two strong tokens per depth, the second `gaps` [n, depths] below the first:
    a gap of 0 forks the tree into two equal branches there, a wide gap makes the depth confident."""
    n, depths = gaps.shape
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, depths, VOCAB, generator=g) * 0.5
    first = torch.randint(1, VOCAB - 1, (n, depths, 1), generator=g)
    second = first % (VOCAB - 2) + 1  # another token
    logits.scatter_(2, first, 8.0)
    logits.scatter_(2, second, 8.0 - gaps[..., None])
    return build_tree(logits, roots, nodes)


# ---- the tree-masked forward ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", TREE_FAMILIES)
@torch.inference_mode()
def test_tree_verify_equals_transformers_per_path(root, family):
    target_dir, _ = family_pair(family, root)
    target, hf = load_target(target_dir), reference(target_dir)
    assert isinstance(target, HfTarget) and target.tree_verify
    taps = list(range(LAYERS))
    target.tap_layer_ids = taps
    seqs = prompts()
    n = len(seqs)
    slots = torch.tensor([4, 0, 2])
    cache = target.new_cache(6, 96)
    # the prompts minus their last token, as one ragged prefill (its padding lands where the tree is written next)
    kept = [len(s) - 1 for s in seqs]
    ids = torch.zeros(n, max(kept), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : kept[i]] = torch.tensor(s[:-1])
    target(ids, cache, slots)
    cache.set_lengths(slots, torch.tensor(kept))
    # row 0: a chain with side branches at every depth; row 1: two equal branches from the root, then confident (node
    # indices run about twice the depths); row 2: in between
    gaps = torch.tensor([[1.0] * 12, [0.0] + [4.0] * 11, [1.5] * 12])
    tree = _two_choice_tree(torch.tensor([s[-1] for s in seqs]), gaps, 24, seed=len(family))
    depth = tree.depth
    assert int(depth.max()) > WINDOW  # root paths longer than the sliding window
    # and ancestors the window leaves out in sequence positions but that lie within it in cache positions (start + j):
    # the sliding layers' window must be measured in the former
    index = torch.arange(24)
    apart = depth[:, :, None] - depth[:, None, :]
    assert bool((tree.ancestors & (apart >= WINDOW) & (depth[:, :, None] - index < WINDOW)).any())
    assert all(len(set(tree.parents[b, 1:].tolist())) < 23 for b in range(n))  # not chains: side branches
    logits, features = target(tree.tokens, cache, slots, tap=True, tree=(tree.depth, tree.ancestors))
    assert cache.lengths[slots].tolist() == kept
    for row, s in enumerate(seqs):
        for i, path in enumerate(_paths(tree, row)):
            seq = s + list(path)
            out = hf(torch.tensor([seq]), output_hidden_states=True, use_cache=False)
            what = f"{family}: row {row}, node {i} (depth {len(path)})"
            close(logits[row, i], out.logits[0, -1], msg=f"{what}: logits")
            close(features[row, i], _features_of(out, taps)[-1], msg=f"{what}: taps")

    # each row's deepest node: its path's K/V moved into place = what a causal forward over the sequence writes
    for row, s in enumerate(seqs):
        leaf = max(range(24), key=lambda i: (int(depth[row, i]), -i))
        chain, j = [], leaf
        while j >= 0:
            chain.append(j)
            j = int(tree.parents[row, j])
        path = torch.tensor(chain[::-1])[None]
        for k_store, v_store in cache.kv_stores():
            compact_kv(k_store, v_store, slots[row: row + 1], cache.lengths[slots[row: row + 1]], path)
        seq = s + list(_paths(tree, row)[leaf])
        ref = target.new_cache(1, 96)
        target(torch.tensor([seq]), ref, torch.tensor([0]))
        m, slot = len(seq), int(slots[row])
        stores = [(k, v, rk, rv) for (k, v), (rk, rv) in zip(cache.kv_stores(), ref.kv_stores())]
        assert len(stores) == sum(shape is not None for shape in target.kv_shapes())
        for k, v, rk, rv in stores:
            close(k[0, slot, :m], rk[0, 0, :m], msg=f"{family}: compacted K, row {row}")
            close(v[0, slot, :m], rv[0, 0, :m], msg=f"{family}: compacted V, row {row}")


# ---- generation = transformers' greedy generate --------------------------------------------------------------------


def _engine(target_dir, drafter_dir, **kwargs) -> TorchEngine:
    return TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=4,
                                       max_seq_len=128, **kwargs)


def _taus(results) -> list[int]:
    return [t for r in results for t in r.stats.taus]


@pytest.mark.parametrize("nodes", [5, 24])
@pytest.mark.parametrize("family", TREE_FAMILIES)
def test_greedy_tree_equals_transformers_generate(root, family, nodes):
    target_dir, drafter_dir = family_pair(family, root)
    seqs = prompts()
    want = hf_greedy(target_dir, seqs, NEW_TOKENS)
    engine = _engine(target_dir, drafter_dir)
    assert engine.step_runner.max_tree_nodes == MAX_TREE_NODES and engine.auto_trees == AUTO_TREES
    params = SamplingParams(max_new_tokens=NEW_TOKENS, ignore_eos=True)
    spec = engine.generate(seqs, params, draft=f"tree:{nodes}")
    assert [r.token_ids for r in spec] == want, f"{family}: tree:{nodes} (random drafter) != transformers generate"
    assert all(1 <= t <= max_depth(nodes, BLOCK) + 1 for t in _taus(spec))

    full = [s + w for s, w in zip(seqs, want)]
    tree = make_tree_oracle(engine, full).generate(seqs, params, draft=f"tree:{nodes}")
    assert [r.token_ids for r in tree] == want, f"{family}: tree:{nodes} (oracle) != transformers generate"
    del engine.step_runner.draft_logits  # the oracle's patch: the same oracle again, fresh, for the chain
    chain = make_tree_oracle(engine, full).generate(seqs, params, draft=f"chain:{min(nodes, BLOCK)}")
    assert [r.token_ids for r in chain] == want, f"{family}: chain (oracle) != transformers generate"
    tau_tree, tau_chain = np.mean(_taus(tree)), np.mean(_taus(chain))
    assert tau_tree > (1.3 if nodes >= 24 else 1.0) * tau_chain, (tau_tree, tau_chain)
    assert_ragged_in_one_step(tree, 8)


@pytest.mark.parametrize("family", TREE_FAMILIES)
def test_device_loop_tree_equals_transformers_generate(root, family):
    """Windows of 4 tree steps, rows finishing at different steps of a window (frozen on the device)."""
    target_dir, drafter_dir = family_pair(family, root)
    seqs = prompts()
    want = hf_greedy(target_dir, seqs, NEW_TOKENS)
    engine = _engine(target_dir, drafter_dir, decode_loop="device", steps_per_sync=4)
    oracle = make_tree_oracle(engine, [s + w for s, w in zip(seqs, want)], seed=1)
    spec = check_ragged_budgets(oracle, seqs, want, draft="tree:16")
    assert np.mean(_taus(spec)) > 2


def test_auto_with_trees_equals_transformers_generate(root):
    """auto on a transformers-backed target: its cost table is measured with tree steps too (SpecStep.time_step on
    dummy lengths), and whatever it picks, the output is transformers' generate."""
    target_dir, drafter_dir = family_pair("gemma4", root)
    seqs = prompts()
    want = hf_greedy(target_dir, seqs, NEW_TOKENS)
    engine = _engine(target_dir, drafter_dir)
    # slot 3 only runs in the cost measurement (dummy tokens): no continuation
    oracle = make_tree_oracle(engine, [s + w for s, w in zip(seqs, want)] + [[]], seed=3)
    out = oracle.generate(seqs, SamplingParams(max_new_tokens=NEW_TOKENS, ignore_eos=True), draft="auto")
    assert [r.token_ids for r in out] == want
    timed = {key[:2]: s for key, s in engine.draft_costs.items()}  # (n, draft) at each cache length timed
    assert all(timed[(n, Draft("tree", t))] > 0 for n in (1, 2, 4) for t in AUTO_TREES)


# ---- hybrid targets keep refusing ----------------------------------------------------------------------------------


@torch.inference_mode()
def test_hybrid_target_refuses_trees(root):
    target_dir, drafter_dir = family_pair("qwen3_5", root)
    engine = TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=2,
                                         max_seq_len=64)
    target = engine.target
    assert isinstance(target, HfTarget) and target.tree_verify is False
    assert engine.step_runner.max_tree_nodes == 0 and engine.auto_trees == ()
    with pytest.raises(RequestError, match=r"draft 'tree:8': this target \(qwen3_5\) has linear-attention layers, "
                                           r"whose recurrent state follows one sequence, not a tree's branches; use "
                                           r"'chain:K' or 'auto'") as info:
        engine.generate([[1, 2, 3]], SamplingParams(max_new_tokens=4), draft="tree:8")
    assert "\n" not in str(info.value)
    assert len(engine.generate([[1, 2, 3]], SamplingParams(max_new_tokens=4), draft="chain:8")[0].token_ids) == 4
    # the target's own forward refuses a tree before it touches the cache or the linear-attention states
    tree = _two_choice_tree(torch.tensor([3]), torch.ones(1, 4), 5, seed=0)
    cache = target.new_cache(1, 32)
    with pytest.raises(ValueError, match=r"qwen3_5: a hybrid target \(linear-attention layers\) cannot verify draft "
                                         r"trees"):
        target(tree.tokens, cache, torch.tensor([0]), tree=(tree.depth, tree.ancestors))
