"""Sliding-window DFlash drafters (config `layer_types` with "sliding_attention" + `sliding_window`).

The oracle is a plain one-sequence re-implementation written here that builds the keys the way z-lab's reference
lays them out (context keys at positions 0..c-1, then the block's B keys) and applies, with explicit loops, what
flash-attn does with transformers' `window_size = (W - 1, W - 1)` for a non-causal call with q_len < k_len: the
queries are aligned to the end of the keys, query i sees key j iff -(W-1) <= j - (i + k_len - q_len) <= W-1, and the
window is passed only when k_len > W. Also: greedy DFlash with this drafter equals AR token for token, and bad
layer_types / sliding_window values are refused with one error naming the field.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch
import torch.nn.functional as F

from dflash_trt import SamplingParams
from dflash_trt import checkpoint as ckpt
from dflash_trt import tiny
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.errors import CheckpointError, ConfigError
from dflash_trt.models import DFlashDrafter

WINDOW = 6
BLOCK = 8
VOCAB = 300
LAYER_TYPES = ["sliding_attention", "full_attention"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("sliding-pair")
    target = tiny.make_target(root / "target", family="qwen3", vocab_size=VOCAB, eos_id=0, layers=4, seed=0)
    drafter = tiny.make_drafter(root / "drafter", target, mask_token_id=VOCAB - 1, layers=2, block_size=BLOCK,
                                layer_types=LAYER_TYPES, sliding_window=WINDOW, seed=1, is_causal=False)
    return target, drafter  # is_causal false, as published sliding drafters say (see test_default_sliding_is_causal)


@pytest.fixture(scope="module")
def drafter(pair):
    return DFlashDrafter.from_pretrained(pair[1], dtype=torch.float32)


def close(actual, expected, msg=""):
    torch.testing.assert_close(actual.float(), expected.float(), atol=2e-5, rtol=2e-5, msg=lambda m: f"{msg}\n{m}")


# ----------------------------------------------------------------------------------------------------------------------
# The plain re-implementation
# ----------------------------------------------------------------------------------------------------------------------


def rms(x, weight, eps):
    return weight * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def rope(x, positions, theta):
    d = x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, d, 2).float() / d)
    angles = positions.float()[:, None] * inv_freq[None, :]
    cos, sin = torch.cat([angles, angles], -1).cos()[:, None], torch.cat([angles, angles], -1).sin()[:, None]
    rotated = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)
    return x * cos + rotated * sin


def linear(x, lin):
    return x @ lin.weight.T


def attend(a, x, ctx, pos_c, pos_b, cfg, mask=None):
    """One drafter attention layer, plainly: the block rows x [b, H] make queries; keys and values are the context
    features ctx [c, H] (this layer's k/v projections, k_norm, RoPE at pos_c) before the block's own (pos_b); full
    attention, or only where mask [b, c + b] is True. a: the layer's self_attn. Returns [b, H] (after o_proj)."""
    eps, heads, kv_heads, hd = cfg.rms_norm_eps, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    theta = cfg.rope["rope_theta"]
    c, b = ctx.shape[0], x.shape[0]
    q = rope(rms(linear(x, a.q_proj).view(b, heads, hd), a.q_norm.weight, eps), pos_b, theta)
    k_c = rope(rms(linear(ctx, a.k_proj).view(c, kv_heads, hd), a.k_norm.weight, eps), pos_c, theta)
    k_b = rope(rms(linear(x, a.k_proj).view(b, kv_heads, hd), a.k_norm.weight, eps), pos_b, theta)
    keys = torch.cat([k_c, k_b]).repeat_interleave(heads // kv_heads, dim=1)
    values = torch.cat([linear(ctx, a.v_proj).view(c, kv_heads, hd),
                        linear(x, a.v_proj).view(b, kv_heads, hd)]).repeat_interleave(heads // kv_heads, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, keys) / math.sqrt(hd)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    attn = torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), values).reshape(b, heads * hd)
    return linear(attn, a.o_proj)


def flash_window_mask(q_len: int, k_len: int, left: int, right: int, window_passed: bool) -> torch.Tensor:
    """flash-attn's local (non-causal) mask, bottom-right aligned, written out element by element."""
    mask = torch.ones(q_len, k_len, dtype=torch.bool)
    if not window_passed:
        return mask
    for i in range(q_len):
        for j in range(k_len):
            offset = j - (i + k_len - q_len)
            mask[i, j] = -left <= offset <= right
    return mask


@torch.no_grad()
def reference(d: DFlashDrafter, context: torch.Tensor, block: torch.Tensor, no_window: bool = False) -> torch.Tensor:
    """One sequence, no cache: context features [c, n*H] (positions 0..c-1), block embeddings [B, H] (c..c+B-1)."""
    cfg = d.cfg
    eps = cfg.rms_norm_eps
    c, b = context.shape[0], block.shape[0]
    pos_c, pos_b = torch.arange(c), torch.arange(c, c + b)
    ctx = rms(linear(context, d.fc), d.hidden_norm.weight, eps)
    h = block
    for layer_type, layer in zip(LAYER_TYPES, d.layers):
        mask = None
        if layer_type == "sliding_attention" and not no_window:
            mask = flash_window_mask(b, c + b, WINDOW - 1, WINDOW - 1, window_passed=c + b > WINDOW)
        h = h + attend(layer.self_attn, rms(h, layer.input_layernorm.weight, eps), ctx, pos_c, pos_b, cfg, mask)
        y = rms(h, layer.post_attention_layernorm.weight, eps)
        m = layer.mlp
        h = h + linear(F.silu(linear(y, m.gate_proj)) * linear(y, m.up_proj), m.down_proj)
    return rms(h, d.norm.weight, eps)


def features(g, d, *shape):
    return torch.randn(*shape, len(d.cfg.target_layer_ids) * d.cfg.hidden_size, generator=g)


# ----------------------------------------------------------------------------------------------------------------------
# (a) the drafter against the reference
# ----------------------------------------------------------------------------------------------------------------------


def test_config_carries_the_layer_types(drafter, pair):
    cfg = ckpt.load_drafter_config(pair[1])
    assert cfg.layer_types == tuple(LAYER_TYPES) and cfg.sliding_window == WINDOW
    assert drafter.sliding == [True, False]
    raw = json.loads((pair[1] / "config.json").read_text())
    assert raw["use_sliding_window"] is True and raw["layer_types"] == LAYER_TYPES


@torch.no_grad()
@pytest.mark.parametrize("c", [0, 1, 3, 5, 13, 20])
def test_single_sequence_matches_flash_window(drafter, c):
    d = drafter
    g = torch.Generator().manual_seed(100 + c)
    ctx, block = features(g, d, c), torch.randn(BLOCK, d.cfg.hidden_size, generator=g)
    out = d(block[None], torch.arange(c, c + BLOCK)[None], ctx[None], torch.tensor([c]), d.new_cache(1, 64),
            torch.tensor([0]))
    expected = reference(d, ctx, block)
    close(out[0], expected, msg=f"c={c}")
    if c >= 2:  # the window is live: without it the answer differs (window 6 < block 8, so even at c small)
        assert (reference(d, ctx, block, no_window=True) - expected).abs().max() > 1e-3


@torch.no_grad()
def test_ragged_batch_scattered_slots_persistent_cache(drafter):
    """Context arriving over several calls into scattered slots (a ragged batch): each call equals the one-shot
    reference on all the context so far; only context counts are committed."""
    d = drafter
    g = torch.Generator().manual_seed(7)
    chunks = [[9, 2, 14], [3, 0, 1], [1, 5, 0], [0, 2, 4]]
    n = len(chunks[0])
    full = features(g, d, n, 40)
    slots = torch.tensor([3, 0, 5])
    cache = d.new_cache(6, 64)
    done = [0] * n
    for step, counts in enumerate(chunks):
        ctx = features(g, d, n, max(counts))  # right padding is garbage
        for j in range(n):
            ctx[j, :counts[j]] = full[j, done[j]:done[j] + counts[j]]
        seen = [done[j] + counts[j] for j in range(n)]
        blocks = torch.randn(n, BLOCK, d.cfg.hidden_size, generator=g)
        positions = torch.stack([torch.arange(s, s + BLOCK) for s in seen])
        out = d(blocks, positions, ctx, torch.tensor(counts), cache, slots, host_slots=slots.tolist())
        for j in range(n):
            close(out[j], reference(d, full[j, :seen[j]], blocks[j]), msg=f"call {step} seq {j}")
        cache.set_lengths(slots, cache.lengths[slots] + torch.tensor(counts))
        done = seen


@torch.no_grad()
def test_forward_train_applies_the_same_window(drafter):
    """forward_train (the trainer's path) with one block after its context equals forward and the reference."""
    d = drafter
    g = torch.Generator().manual_seed(8)
    c = 11
    ctx, block = features(g, d, 1, c), torch.randn(1, BLOCK, d.cfg.hidden_size, generator=g)
    visible = torch.ones(1, BLOCK, c + BLOCK, dtype=torch.bool)
    out = d.forward_train(block, torch.arange(c, c + BLOCK)[None], ctx, torch.arange(c)[None], visible)
    close(out[0], reference(d, ctx[0], block[0]), msg="forward_train")


# ----------------------------------------------------------------------------------------------------------------------
# (b) lossless
# ----------------------------------------------------------------------------------------------------------------------


def test_greedy_spec_equals_ar(pair):
    engine = TorchEngine.from_pretrained(pair[0], pair[1], device="cpu", tokenizer=False, max_batch_size=4,
                                         max_seq_len=128)
    assert any(engine.drafter.sliding)
    prompts = [[5, 17, 42, 9, 100, 3, 77], [8], [250, 251, 12, 44, 60, 61, 62, 63, 64, 65, 66]]
    params = SamplingParams(max_new_tokens=24, ignore_eos=True)
    ar = engine.generate(prompts, params, use_drafter=False)
    for verify_len in (4, BLOCK):
        spec = engine.generate(prompts, params, verify_len=verify_len)
        for a, s in zip(ar, spec):
            assert s.token_ids == a.token_ids and len(s.token_ids) == 24


# ----------------------------------------------------------------------------------------------------------------------
# (c) refusals
# ----------------------------------------------------------------------------------------------------------------------


def _edited(pair, tmp_path, **changes):
    d = tmp_path / "drafter"
    shutil.copytree(pair[1], d)
    raw = json.loads((d / "config.json").read_text())
    for k, v in changes.items():
        if v is KeyError:
            raw.pop(k, None)
        else:
            raw[k] = v
    (d / "config.json").write_text(json.dumps(raw))
    return d


@pytest.mark.parametrize("changes, field", [
    ({"layer_types": ["sliding_attention"]}, "'layer_types'"),
    ({"layer_types": "sliding_attention"}, "'layer_types'"),
    ({"layer_types": ["sliding_attention", "linear_attention"]}, "'layer_types'"),
    ({"layer_types": ["chunked_attention", "full_attention"]}, "'layer_types'"),
    ({"sliding_window": 0}, "'sliding_window'"),
    ({"sliding_window": -3}, "'sliding_window'"),
    ({"sliding_window": 2.5}, "'sliding_window'"),
    ({"sliding_window": True}, "'sliding_window'"),
    ({"sliding_window": None}, "'sliding_window'"),
    ({"use_sliding_window": False}, "'use_sliding_window'"),
])
def test_bad_sliding_fields_are_refused(pair, tmp_path, changes, field):
    with pytest.raises(CheckpointError) as err:
        ckpt.load_drafter_config(_edited(pair, tmp_path, **changes))
    assert field in str(err.value)


def test_all_full_layer_types_load_as_before(pair, tmp_path):
    cfg = ckpt.load_drafter_config(_edited(pair, tmp_path, layer_types=["full_attention"] * 2,
                                           use_sliding_window=False, sliding_window=None))
    assert cfg.layer_types == ("full_attention",) * 2 and cfg.sliding_window is None
    assert not any(DFlashDrafter(cfg).sliding)


def test_new_drafter_config_validates(pair):
    target = ckpt.load_target_config(pair[0])
    with pytest.raises(ConfigError, match="sliding_window"):
        ckpt.new_drafter_config(target, num_hidden_layers=2, mask_token_id=1, layer_types=LAYER_TYPES)
    with pytest.raises(ConfigError, match="layer_types"):
        ckpt.new_drafter_config(target, num_hidden_layers=2, mask_token_id=1, layer_types=["full_attention"],
                                sliding_window=4)


def test_dflash2_config_is_accepted(pair, tmp_path):
    """z-lab's DFlash2 (architectures ["DFlash2DraftModel"], dflash_config with selector_top_k / conv_kernel_size) is
    run now (tests/test_dflash2.py): its config loads; weights without the conv / selector tensors are refused."""
    d = _edited(pair, tmp_path, architectures=["DFlash2DraftModel"], is_causal=False,
                dflash_config={"block_size": 8, "conv_group_size": 16, "conv_kernel_size": 2, "selector_rank": 256,
                               "selector_top_k": 16, "mask_token_id": VOCAB - 1, "target_layer_ids": [0, 3]})
    cfg = ckpt.load_drafter_config(d)
    assert cfg.dflash2 and (cfg.conv_kernel_size, cfg.selector_top_k) == (2, 16)
    with pytest.raises(CheckpointError, match="missing tensor.*attention_conv"):
        DFlashDrafter.from_pretrained(d)


# ----------------------------------------------------------------------------------------------------------------------
# z-lab's causality rule: no `is_causal` field -> sliding layers causal inside the block, full layers not
# ----------------------------------------------------------------------------------------------------------------------


@torch.no_grad()
def test_default_sliding_is_causal(pair, tmp_path):
    """Without `is_causal`, z-lab's Qwen3DFlashAttention makes a sliding layer causal (block key <= query, and
    query - key < W); the full layer stays non-causal. Checked against the training path with an explicit mask."""
    d_dir = tiny.make_drafter(tmp_path / "causal", pair[0], mask_token_id=VOCAB - 1, layers=2, block_size=BLOCK,
                              layer_types=LAYER_TYPES, sliding_window=WINDOW, seed=1)
    assert "is_causal" not in json.loads((d_dir / "config.json").read_text())
    causal = DFlashDrafter.from_pretrained(d_dir, dtype=torch.float32)
    assert causal.causal == [True, False] and causal.cfg.is_causal is None
    noncausal = DFlashDrafter.from_pretrained(pair[1], dtype=torch.float32)
    assert noncausal.causal == [False, False]
    g = torch.Generator().manual_seed(3)
    c = 9
    context = features(g, causal, 1, c)
    block = torch.randn(1, BLOCK, causal.cfg.hidden_size, generator=g)
    pos_c, pos_b = torch.arange(c)[None], torch.arange(c, c + BLOCK)[None]
    visible = torch.ones(1, BLOCK, c + BLOCK, dtype=torch.bool)
    out = causal.forward_train(block, pos_b, context, pos_c, visible)
    # the same drafter by hand: the sliding layer's mask written out (causal + window), the full layer all-visible
    keys = torch.cat([pos_c, pos_b], 1)[0]
    q = pos_b[0]
    hand = torch.tensor([[(k <= p) and (p - k < WINDOW) for k in keys.tolist()] for p in q.tolist()])
    assert torch.equal(causal._layer_mask((True, True), pos_b, keys[None])[0], hand)
    # a block query sees later block keys only in the non-causal variant; the two outputs differ
    same_weights = noncausal.forward_train(block, pos_b, context, pos_c, visible)
    assert not torch.allclose(out, same_weights)
    # causal: the first block query (the last verified token) sees no later block key
    assert hand[0, c + 1:].sum() == 0
    # explicit is_causal true makes the full layer causal too
    d_true = tiny.make_drafter(tmp_path / "all-causal", pair[0], mask_token_id=VOCAB - 1, layers=2, block_size=BLOCK,
                               layer_types=LAYER_TYPES, sliding_window=WINDOW, seed=1, is_causal=True)
    assert DFlashDrafter.from_pretrained(d_true, dtype=torch.float32).causal == [True, True]


def test_is_causal_must_be_a_bool(pair, tmp_path):
    d = tmp_path / "bad"
    shutil.copytree(pair[1], d)
    raw = json.loads((d / "config.json").read_text())
    raw["is_causal"] = "yes"
    (d / "config.json").write_text(json.dumps(raw))
    with pytest.raises(CheckpointError, match="field 'is_causal' must be true, false or absent"):
        ckpt.load_drafter_config(d)


def test_causal_sliding_drafter_is_lossless(pair, tmp_path):
    d_dir = tiny.make_drafter(tmp_path / "causal", pair[0], mask_token_id=VOCAB - 1, layers=2, block_size=BLOCK,
                              layer_types=LAYER_TYPES, sliding_window=WINDOW, seed=1)
    engine = TorchEngine.from_pretrained(pair[0], d_dir, device="cpu", tokenizer=False, max_batch_size=2,
                                         max_seq_len=96)
    prompts = [[5, 17, 42, 9, 100, 3, 77, 8, 9, 10, 11], [8, 1, 2]]
    params = SamplingParams(max_new_tokens=24, ignore_eos=True)
    ar = engine.generate(prompts, params, use_drafter=False)
    spec = engine.generate(prompts, params, verify_len=BLOCK)
    assert [s.token_ids for s in spec] == [a.token_ids for a in ar]
