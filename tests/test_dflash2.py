"""DFlash2 drafters (architectures ["DFlash2DraftModel"], models/dflash2.py).

(a) the grouped dynamic convolution, the whole drafter forward and the candidate selector equal plain
re-implementations written here from the reference's semantics (vLLM qwen3_dflash2.py / dflash2 speculator.py);
(b) checkpoints: a DFlash2 drafter loads, corrupted ones are refused with one clear error;
(c) greedy spec with a random DFlash2 drafter equals AR token for token, and the selector's walk is what drafts.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from dflash_trt import SamplingParams
from dflash_trt import checkpoint as ckpt
from dflash_trt import tiny
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.errors import CheckpointError, ConfigError
from dflash_trt.models import DFlashDrafter
from test_sliding_drafter import attend, close, linear, rms  # the plain building blocks of the drafter re-implementation

VOCAB = 300
BLOCK = 16


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("dflash2-pair")
    target = tiny.make_target(root / "target", family="qwen3", vocab_size=VOCAB, eos_id=0, layers=4, seed=0)
    drafter = tiny.make_drafter(root / "drafter", target, mask_token_id=VOCAB - 1, layers=2, block_size=BLOCK, seed=1,
                                dflash2={"conv_kernel_size": 3})
    return target, drafter


@pytest.fixture(scope="module")
def drafter(pair):
    return DFlashDrafter.from_pretrained(pair[1], dtype=torch.float32)


# ----------------------------------------------------------------------------------------------------------------------
# The plain re-implementation
# ----------------------------------------------------------------------------------------------------------------------


def coefficients(x_src, proj_weight, taps, groups):
    """[Q, 2, taps, groups] from the sublayer's normed input."""
    return (x_src @ proj_weight.T).reshape(x_src.shape[0], 2, taps, groups)


def conv_rows(x, delta, base_side, group_size, block):
    """x [Q, H], delta [Q, taps, G], base_side [taps, H] -> [Q, H], row by row, tap by tap, channel by channel."""
    q, h = x.shape
    taps = base_side.shape[0]
    out = torch.zeros_like(x)
    for t in range(q):
        p = t % block
        for j in range(taps):
            if j > p:
                continue
            for ch in range(h):
                out[t, ch] += (base_side[j, ch] + delta[t, j, ch // group_size]) * x[t - j, ch]
    return out


def wrapped(conv, x, sublayer, cfg):
    """A sublayer between its two convolutions; both sides' coefficients come from x."""
    groups = cfg.hidden_size // cfg.conv_group_size
    d = coefficients(x, conv.kernel_projection.weight, cfg.conv_kernel_size, groups)
    y = sublayer(conv_rows(x, d[:, 0], conv.base_kernel[0], cfg.conv_group_size, cfg.block_size))
    return conv_rows(y, d[:, 1], conv.base_kernel[1], cfg.conv_group_size, cfg.block_size)


@torch.no_grad()
def reference(d: DFlashDrafter, context: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
    """One sequence, no cache: context features [c, n*H] (positions 0..c-1), block embeddings [B, H] (c..c+B-1)."""
    cfg = d.cfg
    eps = cfg.rms_norm_eps
    c, b = context.shape[0], block.shape[0]
    pos_c, pos_b = torch.arange(c), torch.arange(c, c + b)
    ctx = rms(linear(context, d.fc), d.hidden_norm.weight, eps)  # context rows: no convolution
    h = block * cfg.input_embedding_scale
    for layer in d.layers:
        def attention(x, a=layer.self_attn):
            return attend(a, x, ctx, pos_c, pos_b, cfg)

        def mlp(y):
            m = layer.mlp
            return linear(F.silu(linear(y, m.gate_proj)) * linear(y, m.up_proj), m.down_proj)

        h = h + wrapped(layer.attention_conv, rms(h, layer.input_layernorm.weight, eps), attention, cfg)
        h = h + wrapped(layer.mlp_conv, rms(h, layer.post_attention_layernorm.weight, eps), mlp, cfg)
    return rms(h, d.norm.weight, eps)


def plain_select(sel, hidden, logits, anchor, multiplier=1.0, cap=None):
    """Per sequence, per slot: top-K by sorting, edge scores by explicit sums, the greedy walk from index 0."""
    n, length, _ = hidden.shape
    k = sel.top_k
    drafts, all_scores = [], []
    for i in range(n):
        chosen, walk, per = 0, [], []
        prev_ids = [int(anchor[i])] * k
        for slot in range(length):
            order = sorted(range(logits.shape[-1]), key=lambda v: -float(logits[i, slot, v]))[:k]
            unary = [float(logits[i, slot, v]) * multiplier for v in order]
            if cap is not None:
                unary = [math.tanh(u / cap) * cap for u in unary]
            proj = hidden[i, slot] @ sel.hidden_projection.weight.T
            s = torch.zeros(k, k)
            for p in range(k):
                for cand in range(k):
                    s[p, cand] = unary[cand] + float((sel.predecessor_codebook[prev_ids[p]] * proj
                                                      * sel.successor_codebook[order[cand]]).sum())
            row = s[chosen].tolist()
            chosen = row.index(max(row))
            walk.append(order[chosen])
            per.append(s)
            prev_ids = order
        drafts.append(walk)
        all_scores.append(torch.stack(per))
    return torch.tensor(drafts), torch.stack(all_scores)


# ----------------------------------------------------------------------------------------------------------------------
# (a) against the reference
# ----------------------------------------------------------------------------------------------------------------------


@torch.no_grad()
def test_conv_matches_plain(drafter):
    cfg = drafter.cfg
    conv = drafter.layers[0].attention_conv
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 2 * BLOCK, cfg.hidden_size, generator=g)  # two sequences, two blocks each (forward_train)
    y = torch.randn(2, 2 * BLOCK, cfg.hidden_size, generator=g)
    pre, after = conv.prepare(x)
    post = conv.finish(y, after)
    groups = cfg.hidden_size // cfg.conv_group_size
    for i in range(2):
        d = coefficients(x[i], conv.kernel_projection.weight, cfg.conv_kernel_size, groups)
        close(pre[i], conv_rows(x[i], d[:, 0], conv.base_kernel[0], cfg.conv_group_size, BLOCK), "prepare")
        close(post[i], conv_rows(y[i], d[:, 1], conv.base_kernel[1], cfg.conv_group_size, BLOCK), "finish")
    # the taps really reach back (tap 1 and 2 are live) and stop at the block boundary
    x2 = x.clone()
    x2[:, BLOCK - 1] += 1.0  # the last row of block 0 changes ...
    pre2, _ = conv.prepare(x2)
    assert (pre2[:, BLOCK - 1] - pre[:, BLOCK - 1]).abs().max() > 1e-3
    close(pre2[:, BLOCK:], pre[:, BLOCK:], "no tap crosses into the next block")


@torch.no_grad()
@pytest.mark.parametrize("c", [0, 3, 13])
def test_drafter_forward_matches_plain(drafter, c):
    d = drafter
    g = torch.Generator().manual_seed(100 + c)
    ctx = torch.randn(c, len(d.cfg.target_layer_ids) * d.cfg.hidden_size, generator=g)
    block = torch.randn(BLOCK, d.cfg.hidden_size, generator=g)
    out = d(block[None], torch.arange(c, c + BLOCK)[None], ctx[None], torch.tensor([c]), d.new_cache(1, 64),
            torch.tensor([0]))
    close(out[0], reference(d, ctx, block), msg=f"c={c}")
    visible = torch.ones(1, BLOCK, c + BLOCK, dtype=torch.bool)
    train = d.forward_train(block[None], torch.arange(c, c + BLOCK)[None], ctx[None], torch.arange(c)[None], visible)
    close(train[0], out[0], msg="forward_train")


@torch.no_grad()
@pytest.mark.parametrize("multiplier, cap", [(1.0, None), (0.7, 2.0)])
def test_selector_matches_plain(drafter, multiplier, cap):
    sel = drafter.candidate_selector
    old = sel.output_multiplier, sel.softcap
    sel.output_multiplier, sel.softcap = multiplier, cap
    try:
        g = torch.Generator().manual_seed(5)
        n, length = 3, 7
        hidden = torch.randn(n, length, drafter.cfg.hidden_size, generator=g)
        logits = 2 * torch.randn(n, length, VOCAB, generator=g)
        anchor = torch.tensor([4, 77, 250])
        expected_drafts, expected_scores = plain_select(sel, hidden, logits, anchor, multiplier, cap)
        ids, unary = sel.candidates(logits)
        close(sel.scores(ids, unary, hidden, anchor), expected_scores, "edge scores")
        assert torch.equal(drafter.select_drafts(hidden, logits, anchor), expected_drafts)
    finally:
        sel.output_multiplier, sel.softcap = old


# ----------------------------------------------------------------------------------------------------------------------
# (b) checkpoints
# ----------------------------------------------------------------------------------------------------------------------


def _copy(pair, tmp_path, config_changes=None, drop=None):
    d = tmp_path / "drafter"
    shutil.copytree(pair[1], d)
    raw = json.loads((d / "config.json").read_text())
    for k, v in (config_changes or {}).items():
        raw["dflash_config"][k] = v
    (d / "config.json").write_text(json.dumps(raw))
    if drop:
        tensors = load_file(str(d / ckpt.WEIGHTS_NAME))
        del tensors[drop]
        save_file(tensors, str(d / ckpt.WEIGHTS_NAME), metadata={"format": "pt"})
    return d


def test_config_and_weights_load(pair, drafter):
    raw = json.loads((pair[1] / "config.json").read_text())
    assert raw["architectures"] == ["DFlash2DraftModel"]
    cfg = ckpt.load_drafter_config(pair[1])
    assert (cfg.dflash2, cfg.conv_kernel_size, cfg.conv_group_size, cfg.selector_rank, cfg.selector_top_k) == \
        (True, 3, 16, 8, 4)
    names = {n for n, _ in drafter.named_parameters()}
    assert {"layers.1.mlp_conv.base_kernel", "layers.0.attention_conv.kernel_projection.weight",
            "candidate_selector.predecessor_codebook", "candidate_selector.hidden_projection.weight"} <= names


def test_missing_selector_tensor_is_refused(pair, tmp_path):
    d = _copy(pair, tmp_path, drop="candidate_selector.successor_codebook")
    with pytest.raises(CheckpointError, match="missing tensor.*candidate_selector.successor_codebook"):
        DFlashDrafter.from_pretrained(d)


def test_wrong_conv_size_is_refused(pair, tmp_path):
    d = _copy(pair, tmp_path, {"conv_kernel_size": 2})
    with pytest.raises(CheckpointError, match="base_kernel.*has shape \\[2, 3, 64\\].*implies \\[2, 2, 64\\]"):
        DFlashDrafter.from_pretrained(d)


@pytest.mark.parametrize("changes, field", [
    ({"conv_group_size": 7}, "conv_group_size"),
    ({"selector_top_k": None}, "selector_top_k"),
    ({"selector_rank": 0}, "selector_rank"),
    ({"selector_top_k": VOCAB + 1}, "selector_top_k"),
    ({"output_multiplier": "x"}, "output_multiplier"),
])
def test_bad_fields_are_refused(pair, tmp_path, changes, field):
    with pytest.raises(CheckpointError, match=f"'dflash_config.{field}'"):
        ckpt.load_drafter_config(_copy(pair, tmp_path, changes))


def test_new_drafter_config_validates(pair):
    target = ckpt.load_target_config(pair[0])
    with pytest.raises(ConfigError, match="conv_group_size"):
        ckpt.new_drafter_config(target, num_hidden_layers=1, mask_token_id=1,
                                dflash2={**tiny.DFLASH2_TINY, "conv_group_size": 5})


# ----------------------------------------------------------------------------------------------------------------------
# (c) lossless, and the selector really drafts
# ----------------------------------------------------------------------------------------------------------------------

PROMPTS = [[5, 17, 42, 9, 100, 3, 77], [8], [250, 251, 12, 44], [60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72]]


@pytest.fixture(scope="module")
def engine(pair):
    return TorchEngine.from_pretrained(pair[0], pair[1], device="cpu", tokenizer=False, max_batch_size=4,
                                       max_seq_len=128)


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("verify_len", [8, BLOCK])
def test_greedy_spec_equals_ar(engine, batch, verify_len):
    assert engine.drafter.candidate_selector is not None
    prompts = PROMPTS[:batch]
    params = SamplingParams(max_new_tokens=32, ignore_eos=True)
    ar = engine.generate(prompts, params, use_drafter=False)
    calls = []
    real = engine.drafter.select_drafts

    def spy(hidden, logits, anchor):
        drafts = real(hidden, logits, anchor)
        calls.append((logits.argmax(-1), drafts))
        return drafts

    engine.drafter.select_drafts = spy
    try:
        spec = engine.generate(prompts, params, verify_len=verify_len)
    finally:
        del engine.drafter.select_drafts
    for a, s in zip(ar, spec):
        assert s.token_ids == a.token_ids
        assert len(s.token_ids) == 32
    assert calls and all(d.shape[1] == verify_len - 1 for _, d in calls)
    # the drafts are the selector's walk, which differs from the per-slot argmax somewhere
    assert any(not torch.equal(argmax, drafts) for argmax, drafts in calls)


def test_tree_uses_the_marginals_and_is_lossless(engine):
    """draft="tree:N" with a DFlash2 drafter: the tree comes from the per-slot marginals (the selector is not called);
    greedy output = AR."""
    prompts = PROMPTS
    params = SamplingParams(max_new_tokens=24, ignore_eos=True)
    ar = engine.generate(prompts, params, use_drafter=False)

    def refuse(*args):
        raise AssertionError("the selector is not used by draft trees")

    engine.drafter.select_drafts = refuse
    try:
        tree = engine.generate(prompts, params, draft="tree:12")
    finally:
        del engine.drafter.select_drafts
    for a, t in zip(ar, tree):
        assert t.token_ids == a.token_ids


def test_sampling_uses_the_greedy_walk(engine):
    """T > 0: the drafts are still the greedy walk (deterministic, so the one-hot verify stays exact); the run
    completes and is reproducible under a seed."""
    params = SamplingParams(max_new_tokens=24, ignore_eos=True, temperature=0.8, seed=3)
    seen = []
    real = engine.drafter.select_drafts

    def spy(hidden, logits, anchor):
        drafts = real(hidden, logits, anchor)
        seen.append(torch.equal(drafts, real(hidden, logits, anchor)))
        return drafts

    engine.drafter.select_drafts = spy
    try:
        first = engine.generate(PROMPTS, params, verify_len=8)
        second = engine.generate(PROMPTS, params, verify_len=8)
    finally:
        del engine.drafter.select_drafts
    assert seen and all(seen)
    assert [r.token_ids for r in first] == [r.token_ids for r in second]
    assert all(len(r.token_ids) == 24 for r in first)


@pytest.mark.parametrize("sets", [["backend=trtllm", "dtype=bfloat16", "quantization.format=none"],
                                  ["quantization.format=fp8"]])
def test_build_refuses_what_cannot_run_dflash2(pair, tmp_path, sets):
    from pathlib import Path

    from dflash_trt.build.config import load_build_config
    from dflash_trt.build.plan import make_plan

    config = Path(__file__).resolve().parents[1] / "build_configs/tiny-gsm8k-cpu.yaml"
    overrides = [f"target={pair[0]}", f"drafter={pair[1]}", f"output={tmp_path / 'out'}"] + sets
    with pytest.raises(ConfigError, match="DFlash2 drafter"):
        make_plan(load_build_config(config, overrides), compute_capability=(9, 0))
