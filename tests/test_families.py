"""Targets from other transformers causal-LM families (gpt-oss, Qwen3-MoE, Gemma 4 text, Qwen3.5 hybrid), run by their
own transformers modules against the engine's KV cache (models/hf_target.py).

Tiny random models made here with transformers (hidden 64, 4 layers, vocab 512; sliding window 8 where the family has
sliding layers, so every prompt crosses it; MoE with 4 experts, top-2; Qwen3.5: three Gated DeltaNet layers and one
full-attention layer, grouped value heads, whose linear-attention states the engine rolls back after every partial
acceptance and ragged prefill, models/linear_states.py), saved with safetensors, each with a tiny random DFlash drafter
tapping layers [0, 2, 3] (the last included). Checked against transformers itself:

* taps = transformers' hidden_states[i + 1] for every layer (the last after the final norm) and the logits, for a
  ragged batch in scattered slots, then again after a crop (a shorter length) and a block of new tokens;
* AR and DFlash (random drafter, and an oracle drafter with ragged partial acceptance) = transformers' own greedy
  `generate` token for token (one prompt at a time, no padding on its side), verify_len 8 and 16, block 16;
* refused with one clear error: an unexpected / missing tensor, pickle-only weights, linear-attention layers under a
  family whose module has none, a layer type dflash-trt does not run; gpt-oss MXFP4 experts load dequantized (exactly,
  for weights MXFP4 represents exactly).

Qwen3.5-MoE and Qwen3-Next (the same Gated DeltaNet layers in modules of their own) run through the same code and are
tested the same way. The Gemma 4, Qwen3.5 and Qwen3.5-MoE targets are saved as the published checkpoints are:
*ForConditionalGeneration (with a tiny vision tower) whose text model is served; a Gemma4ForCausalLM and a
Qwen3_5ForCausalLM directory are checked for taps too. The rollback of the linear-attention states is tested in more
detail in test_hybrid_target.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from dflash_trt import SamplingParams, tiny
from dflash_trt import checkpoint as ckpt
from dflash_trt.engines.torch_engine import TorchEngine
from dflash_trt.errors import CheckpointError
from dflash_trt.models.hf_target import HfTarget
from dflash_trt.models.target import TargetModel, load_target
from conftest import copy_checkpoint, edit_safetensors
from test_spec_lossless import make_oracle

VOCAB, HIDDEN, LAYERS, WINDOW = 512, 64, 4, 8
MASK_ID = VOCAB - 1
TAPS = [0, 2, LAYERS - 1]
FAMILIES = ["gpt_oss", "qwen3_moe", "gemma4", "qwen3_5", "qwen3_5_moe", "qwen3_next"]
MULTIMODAL = ("gemma4", "qwen3_5", "qwen3_5_moe")  # saved as *ForConditionalGeneration
NO_SLIDING = ("qwen3_moe", "qwen3_5", "qwen3_5_moe", "qwen3_next")
LINEAR_HEADS = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16)
PROMPT_LENGTHS = [21, 9, 14]  # all longer than the sliding window
NEW_TOKENS = 40
ATOL = RTOL = 1e-4

_CACHE: dict = {}


def teardown_module(module):
    _CACHE.clear()


# ----------------------------------------------------------------------------------------------------------------------
# Tiny checkpoints
# ----------------------------------------------------------------------------------------------------------------------


def _text_kwargs() -> dict:
    return dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, max_position_embeddings=4096, eos_token_id=0, bos_token_id=None,
                rms_norm_eps=1e-6)


def hf_config(family: str):
    """The family's config: layers that cross the sliding window, MoE, the family's own twists."""
    import transformers as tf

    alternating = ["sliding_attention", "full_attention"] * (LAYERS // 2)
    if family == "gpt_oss":  # attention sinks, alternating sliding/full, YaRN, 4 experts top-2 with biases
        return tiny.gpt_oss_config(vocab_size=VOCAB, eos_id=0, hidden=HIDDEN, layers=LAYERS, sliding_window=WINDOW)
    if family == "qwen3_moe":  # q/k norms, 4 experts top-2, one dense layer (mlp_only_layers)
        cfg = tf.Qwen3MoeConfig(**_text_kwargs(), pad_token_id=None, intermediate_size=96, moe_intermediate_size=32,
                                num_experts=4, num_experts_per_tok=2, norm_topk_prob=True, mlp_only_layers=[1],
                                tie_word_embeddings=False)
        cfg.architectures = ["Qwen3MoeForCausalLM"]
    elif family in ("gemma4", "gemma4_causal"):
        # scaled embedding, per-layer inputs, alternating sliding/full with other head sizes on full layers (k = v),
        # KV sharing in the last two layers, an MoE block beside the MLP, final logit softcapping, tied head
        text = tf.Gemma4TextConfig(**_text_kwargs(), pad_token_id=0, intermediate_size=96, sliding_window=WINDOW,
                                   layer_types=alternating, hidden_size_per_layer_input=8,
                                   vocab_size_per_layer_input=VOCAB, num_kv_shared_layers=2, enable_moe_block=True,
                                   num_experts=4, top_k_experts=2, moe_intermediate_size=32, attention_k_eq_v=True,
                                   global_head_dim=32, num_global_key_value_heads=1, final_logit_softcapping=30.0,
                                   tie_word_embeddings=True)
        if family == "gemma4_causal":
            text.architectures = ["Gemma4ForCausalLM"]
            return text
        vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=2, head_dim=16)
        cfg = tf.Gemma4Config(text_config=text.to_dict(), vision_config=vision, audio_config=None)
        cfg.architectures = ["Gemma4ForConditionalGeneration"]
    elif family in ("qwen3_5", "qwen3_5_causal", "qwen3_5_moe"):
        # Gated DeltaNet layers (conv + recurrent state, 2 key heads / 4 value heads), gated full attention with q/k
        # norms and partial multimodal RoPE, (1 + w) RMSNorm; Qwen3.5's pattern (3 linear, 1 full) for the served
        # multimodal checkpoints, a full layer in the middle and a linear one last for the causal one. Qwen3.5-MoE:
        # 4 experts top-2 and a shared expert in every layer
        layer_types = (["linear_attention", "full_attention", "linear_attention", "linear_attention"]
                       if family == "qwen3_5_causal" else ["linear_attention"] * 3 + ["full_attention"])
        if family == "qwen3_5_moe":
            text = tf.Qwen3_5MoeTextConfig(**_text_kwargs(), pad_token_id=None, layer_types=layer_types, **LINEAR_HEADS,
                                           moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                                           shared_expert_intermediate_size=32, tie_word_embeddings=False)
        else:
            text = tf.Qwen3_5TextConfig(**_text_kwargs(), pad_token_id=None, intermediate_size=96,
                                        layer_types=layer_types, **LINEAR_HEADS, tie_word_embeddings=False)
        if family == "qwen3_5_causal":
            text.architectures = ["Qwen3_5ForCausalLM"]
            text.dtype = "float32"
            return text
        vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=HIDDEN, patch_size=4,
                      temporal_patch_size=1, spatial_merge_size=1, num_position_embeddings=16)
        if family == "qwen3_5_moe":
            cfg = tf.Qwen3_5MoeConfig(text_config=text.to_dict(), vision_config=vision)
            cfg.architectures = ["Qwen3_5MoeForConditionalGeneration"]
        else:
            cfg = tf.Qwen3_5Config(text_config=text.to_dict(), vision_config=vision)
            cfg.architectures = ["Qwen3_5ForConditionalGeneration"]
    elif family == "qwen3_next":  # Qwen3.5's predecessor: its own projections (fused qkvz / ba), MoE with shared expert
        cfg = tf.Qwen3NextConfig(**_text_kwargs(), pad_token_id=None, intermediate_size=96, **LINEAR_HEADS,
                                 moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                                 shared_expert_intermediate_size=32, mlp_only_layers=[1], tie_word_embeddings=False)
        cfg.architectures = ["Qwen3NextForCausalLM"]
    else:
        raise ValueError(family)
    cfg.dtype = "float32"
    return cfg


def make_target(directory: Path, family: str, seed: int = 0) -> Path:
    """transformers' model of the family, weights scaled as dflash_trt.tiny scales them (logits O(1) with clear gaps:
    argmax far from float noise, so token-for-token equality is a fair demand), saved with safetensors."""
    return tiny.make_hf_target(directory, hf_config(family), seed=seed)


def family_pair(family: str, root: Path) -> tuple[Path, Path]:
    key = ("pair", family)
    if key not in _CACHE:
        target = make_target(root / family / "target", family)
        drafter = tiny.make_drafter(root / family / "drafter", target, mask_token_id=MASK_ID, layers=1, block_size=16,
                                    target_layer_ids=TAPS)
        _CACHE[key] = (target, drafter)
    return _CACHE[key]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("families")


def reference(target_dir: Path):
    """transformers' own model of the checkpoint (the class config.json names), loaded by transformers."""
    key = ("hf", str(target_dir))
    if key not in _CACHE:
        arch = json.loads((target_dir / "config.json").read_text())["architectures"][0]
        import transformers

        _CACHE[key] = getattr(transformers, arch).from_pretrained(str(target_dir)).eval()
    return _CACHE[key]


def prompts(seed: int = 3) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, VOCAB - 1, (n,), generator=g).tolist() for n in PROMPT_LENGTHS]


def close(actual, expected, msg=""):
    torch.testing.assert_close(actual.float(), expected.float(), atol=ATOL, rtol=RTOL, msg=lambda m: f"{msg}\n{m}")


# ----------------------------------------------------------------------------------------------------------------------
# 1. Config, path choice, taps and logits against transformers
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_config_and_path(root, family):
    target_dir, drafter_dir = family_pair(family, root)
    cfg = ckpt.load_target_config(target_dir)
    assert cfg.backend == "transformers" and cfg.family == family
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size) == (HIDDEN, LAYERS, VOCAB)
    assert cfg.sliding_window == (None if family in NO_SLIDING else WINDOW)
    assert cfg.text_of_multimodal == (family in MULTIMODAL)
    ckpt.check_pair(cfg, ckpt.load_drafter_config(drafter_dir), drafter_dir)  # taps incl. the last layer are in range
    target = load_target(target_dir, cfg=cfg)
    assert isinstance(target, HfTarget) and target.fuse() is target
    # the native path is still picked for Qwen3
    if ("native",) not in _CACHE:
        _CACHE[("native",)] = tiny.make_tiny_pair(root / "native", family="qwen3")
    assert isinstance(load_target(_CACHE[("native",)][0]), TargetModel)


def _features_of(out, taps) -> torch.Tensor:
    return torch.cat([out.hidden_states[i + 1][0] for i in taps], dim=-1)


def causal_target(family: str, root: Path) -> Path:
    """The *ForCausalLM directory of a family saved as *ForConditionalGeneration in family_pair (no drafter)."""
    if (family,) not in _CACHE:
        _CACHE[(family,)] = make_target(root / family, family)
    return _CACHE[(family,)]


@pytest.mark.parametrize("family", FAMILIES + ["gemma4_causal", "qwen3_5_causal"])
@torch.inference_mode()
def test_taps_and_logits_equal_transformers(root, family):
    """A ragged batch in scattered slots: prefill, then a crop (3 tokens dropped: into the prefill) and a block of 5
    new tokens. Tap i = transformers' hidden_states[i + 1] for every layer (the last after the final norm), logits
    equal. For Qwen3.5 the crop rolls the linear-attention states back inside the prefill, whose padding must not have
    reached them either."""
    if family.endswith("_causal"):
        target_dir = causal_target(family, root)
    else:
        target_dir, _ = family_pair(family, root)
    target, hf = load_target(target_dir), reference(target_dir)
    taps = list(range(LAYERS))
    target.tap_layer_ids = taps
    seqs = prompts()
    n, longest = len(seqs), max(PROMPT_LENGTHS)
    ids = torch.zeros(n, longest, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    cache = target.new_cache(6, 64)
    slots = torch.tensor([4, 0, 2])
    logits, features = target(ids, cache, slots, tap=True)
    assert features.shape == (n, longest, LAYERS * HIDDEN)
    for i, s in enumerate(seqs):
        out = hf(torch.tensor([s]), output_hidden_states=True, use_cache=False)
        m = len(s)
        close(logits[i, :m], out.logits[0], msg=f"{family}: prefill logits, row {i}")
        close(features[i, :m], _features_of(out, taps), msg=f"{family}: prefill taps, row {i}")
        close(features[i, :m, -HIDDEN:], out.hidden_states[LAYERS][0], msg=f"{family}: last tap after the final norm")

    # crop: keep all but the last 3 tokens, then a block of 5; again in a second cache prefilled in consecutive slots
    # (the slice read path)
    kept = [len(s) - 3 for s in seqs]
    cache.set_lengths(slots, torch.tensor(kept))
    block = torch.randint(1, VOCAB - 1, (n, 5), generator=torch.Generator().manual_seed(5))
    moved = target.new_cache(6, 64)
    target(ids, moved, torch.arange(1, 4), max_length=longest, host_slots=[1, 2, 3])
    moved.set_lengths(torch.arange(1, 4), torch.tensor(kept))
    at = torch.tensor([[4, 0], [2, 2], [0, 3]])
    for c, sl, host in ((cache, slots, None), (moved, torch.arange(1, 4), [1, 2, 3])):
        logits, features = target(block, c, sl, tap=True, logits_at=at, max_length=max(kept) + 5, host_slots=host)
        for i, s in enumerate(seqs):
            full = s[: kept[i]] + block[i].tolist()
            out = hf(torch.tensor([full]), output_hidden_states=True, use_cache=False)
            close(logits[i], out.logits[0, kept[i] + at[i]], msg=f"{family}: logits after crop, row {i}")
            close(features[i], _features_of(out, taps)[kept[i]:], msg=f"{family}: taps after crop, row {i}")
        assert c.lengths[sl].tolist() == kept  # forward never advances lengths
    # the drafter's embedding is the family's (Gemma's is scaled by sqrt(hidden)); logits() is the family's head
    tok = torch.tensor([[1, 2, 3]])
    close(target.embed(tok), hf.get_input_embeddings()(tok), msg="embed")
    if family.startswith("gemma4"):
        assert not torch.allclose(target.embed(tok), target.hf.lm_head.weight[tok], atol=1e-3)


# ----------------------------------------------------------------------------------------------------------------------
# 2. Generation = transformers' greedy generate, token for token
# ----------------------------------------------------------------------------------------------------------------------


@torch.no_grad()
def hf_greedy(target_dir: Path, seqs: list[list[int]], new_tokens: int) -> list[list[int]]:
    """transformers' own generate, greedy, KV cache on, one prompt at a time (no padding), no stop token."""
    from transformers import GenerationConfig

    key = ("greedy", str(target_dir), new_tokens)
    if key not in _CACHE:
        hf = reference(target_dir)
        hf.generation_config = GenerationConfig()
        config = GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=None, do_sample=False, use_cache=True,
                                  eos_token_id=None, pad_token_id=None)
        outs = []
        for s in seqs:
            ids = torch.tensor([s])
            out = hf.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
            outs.append(out[0, len(s):].tolist())
        assert all(len(o) == new_tokens for o in outs)
        _CACHE[key] = outs
    return _CACHE[key]


@pytest.mark.parametrize("verify_len", [8, 16])
@pytest.mark.parametrize("family", FAMILIES)
def test_ar_and_dflash_equal_transformers_generate(root, family, verify_len):
    target_dir, drafter_dir = family_pair(family, root)
    seqs = prompts()
    want = hf_greedy(target_dir, seqs, NEW_TOKENS)
    engine = TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=4,
                                         max_seq_len=128)
    assert isinstance(engine.target, HfTarget)
    params = SamplingParams(max_new_tokens=NEW_TOKENS, ignore_eos=True)
    if verify_len == 8:  # AR once per family
        ar = engine.generate(seqs, params, use_drafter=False)
        assert [r.token_ids for r in ar] == want, f"{family}: AR != transformers generate"
    spec = engine.generate(seqs, params, verify_len=verify_len)
    assert [r.token_ids for r in spec] == want, f"{family}: DFlash (random drafter) != transformers generate"
    assert all(1 <= t <= verify_len for r in spec for t in r.stats.taus)

    # oracle drafts (the true continuation, 15% corrupted): ragged partial acceptance, crops in every step
    oracle = make_oracle(engine, [s + w for s, w in zip(seqs, want)], corrupt=0.15, seed=verify_len)
    spec = oracle.generate(seqs, params, verify_len=verify_len)
    assert [r.token_ids for r in spec] == want, f"{family}: DFlash (oracle drafter) != transformers generate"
    taus = [t for r in spec for t in r.stats.taus]
    assert np.mean(taus) > 2 and max(taus) >= 6 and min(taus) == 1
    assert_ragged_in_one_step(spec, 5)


def assert_ragged_in_one_step(results, steps: int) -> None:
    """Within the first `steps` steps, one step where the batch's rows accepted different lengths."""
    per_step = [r.stats.taus for r in results]
    assert any(len({taus[i] for taus in per_step if i < len(taus)}) > 1 for i in range(steps))


def check_ragged_budgets(oracle, seqs, want, **draft) -> list:
    """Budgets NEW_TOKENS, -13 and -5 (in a device loop, rows finish at different steps of a window): each row's
    output must be its prefix of `want`."""
    budgets = [NEW_TOKENS, NEW_TOKENS - 13, NEW_TOKENS - 5]
    params = [SamplingParams(max_new_tokens=b, ignore_eos=True) for b in budgets]
    spec = oracle.generate(seqs, params, **draft)
    assert [r.token_ids for r in spec] == [w[:b] for w, b in zip(want, budgets)]
    return spec

@pytest.mark.parametrize("family", FAMILIES)
def test_device_loop_equals_transformers_generate(root, family):
    """The device loop (windows of 4 steps, rows finishing inside a window are frozen) through the same target."""
    target_dir, drafter_dir = family_pair(family, root)
    seqs = prompts()
    want = hf_greedy(target_dir, seqs, NEW_TOKENS)
    engine = TorchEngine.from_pretrained(target_dir, drafter_dir, device="cpu", tokenizer=False, max_batch_size=4,
                                         max_seq_len=128, decode_loop="device", steps_per_sync=4)
    oracle = make_oracle(engine, [s + w for s, w in zip(seqs, want)], corrupt=0.15, seed=1)
    check_ragged_budgets(oracle, seqs, want, verify_len=8)


# ----------------------------------------------------------------------------------------------------------------------
# 3. Refused with one clear error; MXFP4 loaded dequantized
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_unexpected_tensor_is_refused(root, tmp_path, family):
    target_dir, drafter_dir = family_pair(family, root)
    bad = copy_checkpoint(target_dir, tmp_path / "t")
    prefix = "model.language_model." if family in MULTIMODAL else "model."  # a text-model tensor, not a tower's
    edit_safetensors(bad, lambda t: t.update({f"{prefix}layers.0.mlp.extra.weight": torch.zeros(4, 4)}))
    with pytest.raises(CheckpointError, match=r"unexpected tensor\(s\) model\.layers\.0\.mlp\.extra\.weight") as info:
        TorchEngine.from_pretrained(bad, drafter_dir, device="cpu", tokenizer=False)
    assert str(bad) in str(info.value) and "\n" not in str(info.value)


def test_missing_misshaped_nonfinite_tensors_and_pickle_weights_are_refused(root, tmp_path):
    target_dir, _ = family_pair("gpt_oss", root)
    missing = copy_checkpoint(target_dir, tmp_path / "missing")
    edit_safetensors(missing, lambda t: t.pop("model.layers.3.self_attn.sinks"))
    with pytest.raises(CheckpointError, match=r"missing tensor\(s\) model\.layers\.3\.self_attn\.sinks"):
        load_target(missing)
    shaped = copy_checkpoint(target_dir, tmp_path / "shaped")
    edit_safetensors(shaped, lambda t: t.update({"model.layers.0.self_attn.q_proj.weight": torch.zeros(32, HIDDEN)}))
    with pytest.raises(CheckpointError, match=r"model\.layers\.0\.self_attn\.q_proj\.weight have shapes"):
        load_target(shaped)
    nan = copy_checkpoint(target_dir, tmp_path / "nan")
    edit_safetensors(nan, lambda t: t["model.norm.weight"].fill_(float("nan")))
    with pytest.raises(CheckpointError, match=r"model\.norm\.weight have NaN/Inf"):
        load_target(nan)
    pickled = copy_checkpoint(target_dir, tmp_path / "pickled")
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")  # never opened: refused by name
    with pytest.raises(CheckpointError, match="pickle weights"):
        load_target(pickled)


def test_layer_types_a_family_does_not_run_are_refused(root, tmp_path):
    """linear_attention layers under a family whose module has none (Qwen3-MoE), and a layer type transformers knows
    but dflash-trt does not run under Qwen3.5: one error naming the layer type, from the config alone."""
    base = json.loads((family_pair("qwen3_moe", root)[0] / "config.json").read_text())
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "config.json").write_text(json.dumps(dict(base, layer_types=["linear_attention", "full_attention"] * 2)))
    with pytest.raises(CheckpointError, match=r"layer type\(s\) \['linear_attention'\], not supported: qwen3_moe's "
                       r"transformers module has full_attention and sliding_attention layers only; 'linear_attention' "
                       r"\(Gated DeltaNet\) layers run in the hybrid families' modules \(Qwen3_5ForCausalLM, "):
        ckpt.load_target_config(mixed)
    raw = json.loads((causal_target("qwen3_5_causal", root) / "config.json").read_text())
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "config.json").write_text(json.dumps(dict(raw, layer_types=["linear_attention", "chunked_attention",
                                                                        "full_attention", "linear_attention"])))
    with pytest.raises(CheckpointError, match=r"layer type\(s\) \['chunked_attention'\], not supported: dflash-trt runs "
                       r"full_attention, sliding_attention, linear_attention layers") as info:
        ckpt.load_target_config(odd)
    assert "\n" not in str(info.value)
    # a sliding layer is one Qwen3.5's module does not have either
    (odd / "config.json").write_text(json.dumps(dict(raw, sliding_window=WINDOW, layer_types=[
        "linear_attention", "sliding_attention", "full_attention", "linear_attention"])))
    with pytest.raises(CheckpointError, match=r"\['sliding_attention'\], not supported: qwen3_5's transformers module "
                       r"has full_attention and linear_attention layers only"):
        ckpt.load_target_config(odd)


FP4 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def _mxfp4(weight: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A gpt-oss expert weight [E, in, out] replaced by one MXFP4 represents exactly, and its blocks [E, out, in/32,
    16] (two FP4 codes per byte, low nibble first) and scales [E, out, in/32] (exponent + 127), the checkpoint layout
    transformers' MXFP4 integration reads."""
    e, n_in, n_out = weight.shape
    codes = torch.randint(0, 16, (e, n_out, n_in // 32, 32), generator=g)
    exps = torch.randint(-4, -1, (e, n_out, n_in // 32), generator=g)
    values = FP4[codes] * torch.exp2(exps.float())[..., None]
    exact = values.reshape(e, n_out, n_in).transpose(1, 2).contiguous()
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)
    return exact, blocks, (exps + 127).to(torch.uint8)


@torch.inference_mode()
def test_gpt_oss_mxfp4_experts_load_dequantized(root, tmp_path):
    """An MXFP4 gpt-oss checkpoint (experts as blocks + scales, quantization_config mxfp4) loads through transformers'
    MXFP4 integration, dequantized: the experts equal the float weights they encode, and the model equals the float
    checkpoint of those weights."""
    target_dir, _ = family_pair("gpt_oss", root)
    float_dir, quant_dir = copy_checkpoint(target_dir, tmp_path / "float"), copy_checkpoint(target_dir, tmp_path / "mxfp4")
    tensors = load_file(str(target_dir / "model.safetensors"))
    g = torch.Generator().manual_seed(9)
    quantized = dict(tensors)
    for name in [n for n in tensors if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        exact, blocks, scales = _mxfp4(tensors[name], g)
        tensors[name] = exact
        del quantized[name]
        quantized[f"{name}_blocks"], quantized[f"{name}_scales"] = blocks, scales
    save_file(tensors, str(float_dir / "model.safetensors"), metadata={"format": "pt"})
    save_file(quantized, str(quant_dir / "model.safetensors"), metadata={"format": "pt"})
    raw = json.loads((quant_dir / "config.json").read_text())
    raw["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
                                  "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (quant_dir / "config.json").write_text(json.dumps(raw))
    assert ckpt.load_target_config(quant_dir).quantization == "mxfp4"
    loaded, plain = load_target(quant_dir), load_target(float_dir)
    for name, t in plain.hf.state_dict().items():
        assert torch.equal(loaded.hf.state_dict()[name], t), name
    ids = torch.tensor([prompts()[0]])
    loaded.tap_layer_ids = plain.tap_layer_ids = TAPS
    a, fa = loaded(ids, loaded.new_cache(1, 32), torch.tensor([0]), tap=True)
    b, fb = plain(ids, plain.new_cache(1, 32), torch.tensor([0]), tap=True)
    assert torch.equal(a, b) and torch.equal(fa, fb)
    raw["quantization_config"] = {"quant_method": "fp8"}
    (quant_dir / "config.json").write_text(json.dumps(raw))
    with pytest.raises(CheckpointError, match="quant_method 'fp8'"):
        ckpt.load_target_config(quant_dir)
