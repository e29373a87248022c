"""train-drafter: the training forward is the serving forward, the loss falls, resume is exact, the output loads."""

from __future__ import annotations

import json

import pytest
import torch

from dflash_trt import SamplingParams
from dflash_trt import checkpoint as ckpt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.models.drafter import DFlashDrafter
from dflash_trt.models.target import TargetModel
from dflash_trt.train.trainer import TrainConfig, block_visibility, slot_weights, train_drafter

QUESTIONS = ["How many apples are left?", "What is 3 + 4?", "Natalia sold 48 clips. How many in May?",
             "A train goes 60 miles per hour. How far in 3 hours?", "Write a poem about the sea.",
             "def add(a, b): return what?", "Weng earns $12 an hour. How much for 50 minutes?", "Why is the sky blue?"]


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    return path


def _cfg(target, out, corpus, **kw):
    base = dict(target=str(target), output=str(out), corpus=str(corpus), num_layers=1, block_size=4, steps=40,
                lr=3e-3, warmup_steps=3, batch_size=4, anchors=4, max_new_tokens=24, max_seq_len=96,
                checkpoint_every=10, seed=0)
    base.update(kw)
    return TrainConfig(**base)


def test_slot_weights_and_visibility():
    w = slot_weights(16, 7.0)
    assert w.shape == (15,) and w[0] == 1.0 and torch.allclose(w[7], torch.exp(torch.tensor(-1.0)))
    vis = block_visibility(torch.tensor([[2, 5]]), context_len=6, block_size=3)
    assert vis.shape == (1, 6, 12)
    assert vis[0, 0, :6].tolist() == [True, True, False, False, False, False]  # block 0 sees context < 2
    assert vis[0, 3, :6].tolist() == [True] * 5 + [False]  # block 1 sees context < 5
    assert vis[0, 1, 6:].tolist() == [True] * 3 + [False] * 3  # its own block, bidirectional, not the other block
    assert vis[0, 4, 6:].tolist() == [False] * 3 + [True] * 3


def test_training_forward_equals_serving_forward(make_pair):
    """Two blocks trained in one pass see exactly what the cached inference forward gives each of them."""
    target_dir, drafter_dir = make_pair(family="qwen3")
    target = TargetModel.from_pretrained(target_dir)
    drafter = DFlashDrafter.from_pretrained(drafter_dir)
    target.tap_layer_ids = drafter.cfg.target_layer_ids
    tokens = torch.randint(2, 300, (1, 30))
    with torch.no_grad():
        _, features = target(tokens, target.new_cache(1, 30), torch.arange(1), tap=True)
        b = drafter.block_size
        anchors = torch.tensor([[7, 19]])
        block_ids = torch.full((1, 2, b), drafter.mask_token_id)
        block_ids[0, :, 0] = tokens[0, anchors[0]]
        positions = anchors[:, :, None] + torch.arange(b)
        trained = drafter.forward_train(target.embed(block_ids).reshape(1, 2 * b, -1), positions.reshape(1, -1),
                                        features, torch.arange(30)[None], block_visibility(anchors, 30, b))
        for m, a in enumerate(anchors[0].tolist()):
            cache = drafter.new_cache(1, 64)
            served = drafter(target.embed(block_ids[:, m]), positions[:, m], features[:, :a], torch.tensor([a]),
                             cache, torch.arange(1))
            torch.testing.assert_close(trained[:, m * b:(m + 1) * b], served, atol=1e-5, rtol=1e-5)


def test_train_drafter_loss_falls_and_output_loads(make_pair, corpus, tmp_path):
    target_dir, _ = make_pair(family="qwen3")
    out = tmp_path / "drafter"
    train_drafter(_cfg(target_dir, out, corpus))
    record = json.loads((out / "training.json").read_text())
    state = json.loads((tmp_path / "drafter.work" / "checkpoint" / "state.json").read_text())
    losses = state["history"]["loss"]
    assert len(losses) == 40
    assert sum(losses[-8:]) / 8 < 0.85 * sum(losses[:8]) / 8  # it learns the target's continuations
    assert record["steps_done"] == 40 and (out / "loss.png").stat().st_size > 1000
    # z-lab format, loads through the normal path, and serves losslessly
    cfg = ckpt.load_drafter_config(out)
    assert cfg.block_size == 4 and cfg.num_hidden_layers == 1
    engine = TorchEngine.from_pretrained(target_dir, out, device="cpu")
    params = SamplingParams(max_new_tokens=16, ignore_eos=True)
    spec = engine.generate(QUESTIONS[:3], params)
    ar = engine.generate(QUESTIONS[:3], params, use_drafter=False)
    assert [s.token_ids for s in spec] == [a.token_ids for a in ar]


def test_resume_is_exact(make_pair, corpus, tmp_path):
    target_dir, _ = make_pair(family="qwen3")
    straight = tmp_path / "straight"
    train_drafter(_cfg(target_dir, straight, corpus, steps=6, checkpoint_every=3))
    resumed = tmp_path / "resumed"
    train_drafter(_cfg(target_dir, resumed, corpus, steps=3, checkpoint_every=3))
    train_drafter(_cfg(target_dir, resumed, corpus, steps=6, checkpoint_every=3, resume=True))
    a = DFlashDrafter.from_pretrained(straight).state_dict()
    b = DFlashDrafter.from_pretrained(resumed).state_dict()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-6, rtol=1e-5)


def test_bad_training_options(make_pair, corpus, tmp_path):
    from dflash_trt.errors import ConfigError

    target_dir, _ = make_pair(family="qwen3")
    with pytest.raises(ConfigError, match="block-size"):
        train_drafter(_cfg(target_dir, tmp_path / "x", corpus, block_size=1))
    with pytest.raises(ConfigError, match="corpus"):
        train_drafter(_cfg(target_dir, tmp_path / "x", tmp_path / "missing.jsonl"))
    with pytest.raises(ConfigError, match="steps"):
        train_drafter(_cfg(target_dir, tmp_path / "x", corpus, steps=0))
    assert not (tmp_path / "x").exists()


def test_branches_are_greedy_continuations_after_sampled_prefixes(make_pair, tmp_path):
    """Branch 0 = the greedy continuation of the prompt; branch b >= 1 = a seeded sampled prefix, then the target's own
    greedy continuation of (prompt + prefix) — the part the trainer takes labels from."""
    from dflash_trt.train.data import branch_prefix_length, self_distill

    target_dir, _ = make_pair(family="qwen3")
    engine = TorchEngine.from_pretrained(target_dir, None, device="cpu")
    prompts = [[5, 6, 7], [8, 9, 10, 11], [12, 13]]
    new = 12
    seqs = self_distill(engine, prompts, new, tmp_path / "d.jsonl", batch_size=4, branches=3, seed=1)
    assert len(seqs) == 9
    greedy = SamplingParams(max_new_tokens=new)
    for i, (start_len, tokens) in enumerate(seqs):
        branch, prompt = divmod(i, 3)
        prefix = tokens[len(prompts[prompt]): start_len]
        assert tokens[: len(prompts[prompt])] == prompts[prompt]
        assert len(prefix) == (0 if branch == 0 else branch_prefix_length(1, branch, prompt, new))
        assert 0 < len(tokens) - start_len <= new
        assert tokens[start_len:] == engine.generate([tokens[:start_len]], greedy, use_drafter=False)[0].token_ids
    assert len({tuple(t) for _, t in seqs}) > 3  # the branches are distinct contexts
    # cached: a second call reads the file (and a shorter request is a prefix of it)
    assert self_distill(engine, prompts, new, tmp_path / "d.jsonl", branches=3, seed=1) == seqs
    assert self_distill(engine, prompts, new, tmp_path / "d.jsonl", branches=2, seed=1) == seqs[:6]
    # same seed, fresh file: the same data
    assert self_distill(engine, prompts, new, tmp_path / "e.jsonl", batch_size=2, branches=3, seed=1) == seqs


def test_sequence_room_is_checked(make_pair, corpus, tmp_path):
    from dflash_trt.errors import ConfigError

    target_dir, _ = make_pair(family="qwen3")
    with pytest.raises(ConfigError, match="max-seq-len"):
        train_drafter(_cfg(target_dir, tmp_path / "x", corpus, max_new_tokens=80, max_seq_len=96, branches=2))
    assert not (tmp_path / "x").exists()


def test_cached_features_train_like_online_features(make_pair, corpus, tmp_path):
    """--cache-features only moves the target forward out of the loop: same batches, same features up to float16
    rounding, so the same losses to a few parts in a thousand."""
    from dflash_trt.train.trainer import cache_target_features, target_features, _padded

    target_dir, _ = make_pair(family="qwen3")
    online, cached = tmp_path / "online", tmp_path / "cached"
    train_drafter(_cfg(target_dir, online, corpus, steps=8, branches=2))
    train_drafter(_cfg(target_dir, cached, corpus, steps=8, branches=2, cache_features=True))
    losses = [json.loads((d.parent / f"{d.name}.work" / "checkpoint" / "state.json").read_text())["history"]["loss"]
              for d in (online, cached)]
    assert len(losses[1]) == 8
    torch.testing.assert_close(torch.tensor(losses[1]), torch.tensor(losses[0]), rtol=5e-3, atol=5e-3)
    # the store holds each sequence's own rows, whatever it was batched with
    target = TargetModel.from_pretrained(target_dir)
    target.tap_layer_ids = ckpt.load_drafter_config(cached).target_layer_ids
    seqs = [[5, 6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16]]
    store = cache_target_features(target, seqs, torch.device("cpu"), batch_size=2)
    for seq, stored in zip(seqs, store):
        alone = target_features(target, _padded([seq], "cpu")[0])[0]
        assert stored.dtype == torch.float16 and stored.shape == alone.shape
        torch.testing.assert_close(stored.float(), alone, rtol=2e-3, atol=2e-3)
