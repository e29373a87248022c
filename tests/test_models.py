"""Model numerics against oracles.

* The target (Qwen3 / Llama, tied and untied, GQA and MHA, biases, llama3 RoPE scaling) against transformers' own
  implementation loaded from the same checkpoint: prefill logits, tapped hidden states, batched ragged decode, KV crop.
* The DFlash drafter against a plain per-sequence re-implementation written out below (no cache, no batching, explicit
  matmul/softmax attention): one-shot, ragged batch, and the persistent context cache over several calls.

CPU, float32 unless stated; tiny models so the whole file runs in seconds.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from dflash_trt import checkpoint as ckpt
from dflash_trt import tiny
from dflash_trt.models import DFlashDrafter, TargetModel

ATOL = 1e-4  # fp32 logits / hidden states are O(1)
RTOL = 1e-4


def close(actual: torch.Tensor, expected: torch.Tensor, atol: float = ATOL, rtol: float = RTOL, msg: str = "") -> None:
    torch.testing.assert_close(actual.float(), expected.float(), atol=atol, rtol=rtol, msg=lambda m: f"{msg}\n{m}")


# ----------------------------------------------------------------------------------------------------------------------
# Checkpoints and loaded models (cached: loading transformers models is the slow part)
# ----------------------------------------------------------------------------------------------------------------------

# name -> make_pair kwargs. All GQA unless stated; llama uses llama3 RoPE scaling (see tiny._target_hf_config).
VARIANTS = {
    "qwen3": dict(family="qwen3", tie=False),
    "qwen3-tied": dict(family="qwen3", tie=True),
    "llama": dict(family="llama", tie=False),
    "llama-tied": dict(family="llama", tie=True),
    "qwen3-wide-head": dict(family="qwen3", tie=False, vocab_size=256, head_dim=32),  # head_dim != hidden / heads
    "llama-mha": dict(family="llama", tie=True, vocab_size=256, kv_heads=4),  # kv_heads == heads
}

_MODELS: dict = {}


def _bias_target(root, family: str) -> str:
    """A target with attention_bias and mlp_bias (tiny.make_target cannot express them): transformers' config class +
    random safetensors under the HF tensor names from checkpoint.target_tensor_shapes."""
    from safetensors.torch import save_file
    from transformers import LlamaConfig, Qwen3Config

    common = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=4096,
                  tie_word_embeddings=False, eos_token_id=0, bos_token_id=None, pad_token_id=None, attention_bias=True)
    if family == "llama":
        hf = LlamaConfig(**common, mlp_bias=True,
                         rope_parameters={"rope_type": "llama3", "rope_theta": 500_000.0, "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 256})
        hf.architectures = ["LlamaForCausalLM"]
    else:  # Qwen3 has attention_bias but no mlp_bias
        hf = Qwen3Config(**common, rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0})
        hf.architectures = ["Qwen3ForCausalLM"]
    hf.dtype = "float32"
    directory = root / f"bias-{family}"
    hf.save_pretrained(str(directory))
    cfg = ckpt.load_target_config(directory)
    assert cfg.attention_bias and cfg.mlp_bias == (family == "llama")
    shapes = ckpt.target_tensor_shapes(cfg)
    assert "model.layers.0.self_attn.o_proj.bias" in shapes
    assert ("model.layers.0.mlp.down_proj.bias" in shapes) == (family == "llama")
    tensors = tiny._random_tensors(shapes, torch.Generator().manual_seed(7))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(directory / ckpt.WEIGHTS_NAME),
              metadata={"format": "pt"})
    return directory


@pytest.fixture(scope="module")
def target_dir(make_pair, tmp_path_factory):
    def _get(name: str):
        key = ("dir", name)
        if key not in _MODELS:
            if name.startswith("bias-"):
                _MODELS[key] = _bias_target(tmp_path_factory.mktemp("bias"), name[len("bias-"):])
            else:
                _MODELS[key] = make_pair(**VARIANTS[name])[0]
        return _MODELS[key]

    return _get


@pytest.fixture(scope="module")
def models(target_dir):
    """models(name, dtype) -> (ours, hf), both loaded from the same directory."""
    from transformers import AutoModelForCausalLM

    def _get(name: str, dtype: torch.dtype = torch.float32):
        key = ("models", name, dtype)
        if key not in _MODELS:
            directory = target_dir(name)
            ours = TargetModel.from_pretrained(directory, dtype=dtype)
            hf = AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype).eval()
            _MODELS[key] = (ours, hf)
        return _MODELS[key]

    return _get


def teardown_module(module):
    _MODELS.clear()


@torch.no_grad()
def hf_run(hf, ids) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """transformers on one sequence: logits [T, V] and, per decoder layer i, hidden_states[i + 1] [T, H] (the tap
    convention: layer i's output, the last layer's after the final norm)."""
    out = hf(torch.as_tensor(ids)[None], output_hidden_states=True, use_cache=False)
    return out.logits[0], [h[0] for h in out.hidden_states[1:]]


@torch.no_grad()
def hf_raw_layer_output(hf, ids, layer: int) -> torch.Tensor:
    """The raw output of one transformers decoder layer [T, H], hooked (for the last layer: before the final norm)."""
    captured: list[torch.Tensor] = []
    hook = hf.model.layers[layer].register_forward_hook(
        lambda mod, args, out: captured.append(out[0] if isinstance(out, tuple) else out))
    try:
        hf(torch.as_tensor(ids)[None], use_cache=False)
    finally:
        hook.remove()
    return captured[0][0]


def random_ids(generator: torch.Generator, vocab: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=generator)


# ----------------------------------------------------------------------------------------------------------------------
# 1. Target vs transformers: prefill logits and tapped hidden states
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(VARIANTS) + ["bias-llama", "bias-qwen3"])
@torch.no_grad()
def test_target_prefill_matches_transformers(models, name):
    ours, hf = models(name)
    cfg = ours.cfg
    layers = cfg.num_hidden_layers
    taps = list(range(layers))  # every layer, the last one included
    ours.tap_layer_ids = taps
    g = torch.Generator().manual_seed(11)
    ids = random_ids(g, cfg.vocab_size, 37)

    cache = ours.new_cache(1, 64)
    logits, features = ours(ids[None], cache, torch.tensor([0]), tap=True)

    out = hf(ids[None], output_hidden_states=True, use_cache=False)
    close(logits[0], out.logits[0], msg=f"{name}: prefill logits")
    assert features.shape == (1, 37, len(taps) * cfg.hidden_size)
    hidden = cfg.hidden_size
    for j, i in enumerate(taps):  # z-lab convention: tap i is exactly transformers' hidden_states[i + 1] ...
        close(features[0, :, j * hidden:(j + 1) * hidden], out.hidden_states[i + 1][0], msg=f"{name}: tap of layer {i}")
    raw = hf_raw_layer_output(hf, ids, layers - 1)
    last = features[0, :, (layers - 1) * hidden:]  # ... which for the last layer is its output after the final norm
    assert (last - raw).abs().max() > 1e-2, f"{name}: the last tap must be normed, not the raw layer output"
    close(last, hf.model.norm(raw), msg=f"{name}: last tap = final norm of the last layer's output")
    # the order of tap_layer_ids is the order of the features, whatever it is
    ours.tap_layer_ids = [layers - 1, 0]
    _, swapped = ours(ids[None], ours.new_cache(1, 64), torch.tensor([0]), tap=True)
    close(swapped[0, :, :hidden], out.hidden_states[layers][0], msg=f"{name}: last tap first")
    close(swapped[0, :, hidden:], out.hidden_states[1][0], msg=f"{name}: layer 0 second")

    # logits_at selects positions; tap=False returns no features
    cache = ours.new_cache(1, 64)
    at = torch.tensor([[36, 0, 17]])
    picked, none = ours(ids[None], cache, torch.tensor([0]), logits_at=at)
    assert none is None
    close(picked[0], out.logits[0, [36, 0, 17]], msg=f"{name}: logits_at")


@pytest.mark.parametrize("name", ["qwen3", "llama", "qwen3-tied", "bias-llama"])
def test_target_loads_what_transformers_loads(models, name):
    """Every parameter equal to transformers' (names mirror HF); tied heads share the embedding; RoPE tables equal."""
    ours, hf = models(name)
    hf_state = hf.state_dict()
    for pname, p in ours.state_dict().items():
        assert pname in hf_state, pname
        assert torch.equal(p, hf_state[pname]), pname
    if ours.cfg.tie_word_embeddings:
        assert torch.equal(ours.lm_head.weight, ours.model.embed_tokens.weight)
    else:
        assert not torch.equal(ours.lm_head.weight, ours.model.embed_tokens.weight)
    close(ours.rotary.inv_freq, hf.model.rotary_emb.inv_freq.float(), atol=0, rtol=1e-6, msg="inv_freq")
    assert ours.rotary.attention_scaling == pytest.approx(hf.model.rotary_emb.attention_scaling)


def test_llama3_rope_scaling_is_applied(models):
    """The llama tiny target uses llama3 scaling: its frequencies must differ from unscaled RoPE with the same theta
    (otherwise the oracle comparison above would not be exercising the scaled path)."""
    ours, _ = models("llama")
    assert ours.cfg.rope["rope_type"] == "llama3"
    d, theta = ours.cfg.head_dim, ours.cfg.rope["rope_theta"]
    plain = 1.0 / theta ** (torch.arange(0, d, 2).float() / d)
    assert not torch.allclose(ours.rotary.inv_freq, plain)
    close(ours.rotary.inv_freq[:2], plain[:2], msg="high frequencies are unscaled")


@torch.no_grad()
def test_target_long_prompt_llama3(models):
    """Positions past original_max_position_embeddings (256) where llama3 scaling matters most."""
    ours, hf = models("llama")
    g = torch.Generator().manual_seed(5)
    ids = random_ids(g, ours.cfg.vocab_size, 300)
    cache = ours.new_cache(1, 320)
    logits, _ = ours(ids[None], cache, torch.tensor([0]))
    ref, _ = hf_run(hf, ids)
    close(logits[0], ref, atol=3e-4, rtol=3e-4, msg="long llama3 prefill")


@pytest.mark.parametrize("name", ["qwen3", "llama-tied"])
@torch.no_grad()
def test_target_bfloat16(make_pair, name):
    """A bfloat16 checkpoint loaded in its own dtype by both: logits agree to bf16 precision."""
    from transformers import AutoModelForCausalLM

    target, _ = make_pair(**VARIANTS[name], dtype="bfloat16")
    ours = TargetModel.from_pretrained(target)  # dtype from config.json
    assert ours.model.embed_tokens.weight.dtype == torch.bfloat16
    assert ours.lm_head.weight.dtype == torch.bfloat16
    hf = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.bfloat16).eval()
    g = torch.Generator().manual_seed(3)
    ids = random_ids(g, ours.cfg.vocab_size, 48)
    cache = ours.new_cache(1, 64)
    assert cache.k.dtype == torch.bfloat16
    logits, _ = ours(ids[None], cache, torch.tensor([0]))
    assert logits.dtype == torch.bfloat16
    ref = hf(ids[None], use_cache=False).logits[0].float()
    ours_l = logits[0].float()
    scale = ref.abs().max().item()
    diff = (ours_l - ref).abs().max().item()
    agree = (ours_l.argmax(-1) == ref.argmax(-1)).float().mean().item()
    assert diff <= 0.05 * scale, (diff, scale)
    assert agree >= 0.9, agree
    # and bf16 is close to the fp32 model (sanity: the bf16 path is not garbage that happens to match HF's garbage)
    ours32 = TargetModel.from_pretrained(target, dtype=torch.float32)
    l32, _ = ours32(ids[None], ours32.new_cache(1, 64), torch.tensor([0]))
    assert (l32[0] - ours_l).abs().max().item() <= 0.1 * scale


# ----------------------------------------------------------------------------------------------------------------------
# 2./3. Batched ragged forward, decode with k tokens per sequence, KV crop
# ----------------------------------------------------------------------------------------------------------------------


def test_causal_attention_matches_the_masked_attention():
    """A prefill's attention without a mask (causal_attention: what a prefill into empty caches runs on CUDA, where
    the masked GQA call builds a cuDNN plan per prompt length) equals the masked one (`attention` with the causal
    mask forward_positions makes) on every real token of right-padded rows; GQA and plain heads."""
    from dflash_trt.models.layers import attention, causal_attention, forward_positions

    g = torch.Generator().manual_seed(5)
    for heads, kv_heads in ((8, 2), (4, 4)):
        q = torch.randn(3, 11, heads, 16, generator=g)
        k, v = torch.randn(3, 11, kv_heads, 16, generator=g), torch.randn(3, 11, kv_heads, 16, generator=g)
        pos = forward_positions(torch.zeros(3, dtype=torch.long), 11, 11)
        want = attention(q, k, v, pos.visible, 0.25)
        got = causal_attention(q, k, v, 0.25)
        assert got.shape == want.shape == (3, 11, heads * 16)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(causal_attention(q, k, v, 0.5), want, rtol=1e-3, atol=1e-3)  # the scale is used


@pytest.mark.gpu
@torch.no_grad()
def test_fresh_prefill_on_gpu_matches_the_masked_forward(make_pair):
    """On CUDA a prefill (`fresh`) attends through causal_attention: its logits, taps and cache entries equal the
    masked forward's on every real token of a ragged batch."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from dflash_trt.models.target import load_target

    target = load_target(make_pair("qwen3")[0], device="cuda")
    target.tap_layer_ids = [1, 3]
    g = torch.Generator().manual_seed(3)
    lens = [9, 31, 17]
    ids = random_ids(g, target.cfg.vocab_size, 3, max(lens)).cuda()
    slots = torch.tensor([2, 0, 1], device="cuda")
    out = {}
    for fresh in (False, True):
        cache = target.new_cache(4, 64)
        logits, feats = target(ids, cache, slots, tap=True, fresh=fresh)
        out[fresh] = (logits, feats, cache.read(0, slots, max(lens))[0])
    for j, n in enumerate(lens):
        for a, b in zip(out[False], out[True]):
            torch.testing.assert_close(b[j, :n], a[j, :n], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["qwen3", "llama", "bias-llama"])
@torch.no_grad()
def test_target_batched_ragged_decode(models, name):
    ours, hf = models(name)
    vocab = ours.cfg.vocab_size
    g = torch.Generator().manual_seed(21)
    ours.tap_layer_ids = [1, 3]
    hidden = ours.cfg.hidden_size
    prompt_lens = [7, 13, 4]
    seqs = [random_ids(g, vocab, n).tolist() for n in prompt_lens]
    slots = torch.tensor([2, 0, 3])  # not 0..n-1, and max_batch > n
    cache = ours.new_cache(4, 64)
    cache.set_lengths(torch.tensor([1]), torch.tensor([5]))  # an unrelated slot with state: must not matter

    t = max(prompt_lens)
    batch = random_ids(g, vocab, 3, t)  # right padding is random garbage, not a pad id
    for j, s in enumerate(seqs):
        batch[j, :len(s)] = torch.tensor(s)
    logits, feats = ours(batch, cache, slots, tap=True)
    for j, s in enumerate(seqs):
        ref, per_layer = hf_run(hf, s)
        close(logits[j, :len(s)], ref, msg=f"prefill seq {j}")
        close(feats[j, :len(s), :hidden], per_layer[1], msg=f"prefill taps seq {j}")
        close(feats[j, :len(s), hidden:], per_layer[3], msg=f"prefill taps seq {j}")
    cache.set_lengths(slots, torch.tensor(prompt_lens))

    # decode: k tokens per sequence; commit all of them (k=1) or a different number per sequence (k=4: partial
    # acceptance, so the rejected K/V stay in the cache beyond the committed length and must have no effect)
    schedule = [(1, [1, 1, 1]), (1, [1, 1, 1]), (4, [4, 1, 3]), (4, [2, 4, 0]), (1, [1, 1, 1]), (4, [4, 4, 4])]
    for step, (k, keep) in enumerate(schedule):
        new = random_ids(g, vocab, 3, k)
        lengths = cache.lengths[slots].clone()
        max_length = int(lengths.max()) + k if step % 2 else None  # host-side max, sometimes given
        logits, feats = ours(new, cache, slots, tap=True, max_length=max_length)
        assert torch.equal(cache.lengths[slots], lengths), "forward must not advance lengths"
        for j in range(3):
            assert len(seqs[j]) == int(lengths[j])
            ref, per_layer = hf_run(hf, seqs[j] + new[j].tolist())
            close(logits[j], ref[-k:], msg=f"step {step} (k={k}) seq {j}")
            close(feats[j, :, :hidden], per_layer[1][-k:], msg=f"step {step} taps seq {j}")
        for j in range(3):
            seqs[j] += new[j, :keep[j]].tolist()
        cache.set_lengths(slots, lengths + torch.tensor(keep))
    assert int(cache.lengths[1]) == 5


@torch.no_grad()
def test_forward_over_slots_with_holes_reads_their_span_exactly(models, drafter_setup):
    """Slots with holes between them (requests that left a batch) given on the host are read as the span between them
    (a view) instead of gathered (a copy): the target's and the drafter's outputs are bitwise those of the gathered
    read, whatever the rows in the holes hold."""
    from dflash_trt.models.kv_cache import slot_span

    ours, _ = models("qwen3")
    d, _, _ = drafter_setup
    g = torch.Generator().manual_seed(23)
    vocab, hidden = ours.cfg.vocab_size, d.cfg.hidden_size
    slots = torch.tensor([0, 2, 3, 5])  # holes at 1 and 4: span 0..5 (6 rows for 4 slots)
    rows, within = slot_span(slots, slots.tolist())
    assert rows == slice(0, 6) and within.tolist() == [0, 2, 3, 5]
    assert slot_span(torch.tensor([0, 5]), [0, 5])[1] is None  # 6 rows for 2 slots: gathered
    ours.tap_layer_ids = [1, 3]
    caches = []
    for _ in range(2):
        cache = ours.new_cache(6, 64)
        filler = random_ids(torch.Generator().manual_seed(1), vocab, 6, 9)  # the holes hold a request's K/V
        ours(filler, cache, torch.arange(6))
        cache.set_lengths(torch.arange(6), torch.tensor([9, 4, 9, 9, 7, 9]))
        caches.append(cache)
    for step, k in enumerate((1, 4, 1)):
        new = random_ids(g, vocab, 4, k)
        span = ours(new, caches[0], slots, tap=True, host_slots=slots.tolist())
        gathered = ours(new, caches[1], slots, tap=True)
        assert torch.equal(span[0], gathered[0]) and torch.equal(span[1], gathered[1]), f"target step {step}"
        assert torch.equal(caches[0].k, caches[1].k) and torch.equal(caches[0].v, caches[1].v)
        for cache in caches:
            cache.set_lengths(slots, cache.lengths[slots] + 1)
    dcaches = [d.new_cache(6, 64) for _ in range(2)]
    for c in dcaches:  # the holes hold context of their own
        d(torch.randn(6, 3, hidden, generator=torch.Generator().manual_seed(2)), torch.arange(5, 8).expand(6, 3),
          _features(torch.Generator().manual_seed(3), d, 6, 5), torch.full((6,), 5), c, torch.arange(6))
        c.set_lengths(torch.arange(6), torch.full((6,), 5))
    counts = torch.tensor([3, 1, 0, 2])
    ctx, block = _features(g, d, 4, 3), torch.randn(4, 8, hidden, generator=g)
    positions = (5 + counts)[:, None] + torch.arange(8)
    span = d(block, positions, ctx, counts, dcaches[0], slots, host_slots=slots.tolist())
    gathered = d(block, positions, ctx, counts, dcaches[1], slots)
    assert torch.equal(span, gathered), "drafter"


@pytest.mark.parametrize("name", ["qwen3", "llama-tied"])
@torch.no_grad()
def test_target_kv_crop(models, name):
    """Write 5 tokens, keep 2 (crop), feed different tokens: logits equal transformers on prefix + kept + new."""
    ours, hf = models(name)
    vocab = ours.cfg.vocab_size
    g = torch.Generator().manual_seed(31)
    prefix = random_ids(g, vocab, 9).tolist()
    slot = torch.tensor([0])
    cache = ours.new_cache(1, 32)
    ours(torch.tensor([prefix]), cache, slot)
    cache.set_lengths(slot, torch.tensor([9]))

    draft = random_ids(g, vocab, 5).tolist()
    logits, _ = ours(torch.tensor([draft]), cache, slot)
    close(logits[0], hf_run(hf, prefix + draft)[0][-5:], msg="draft block")
    cache.set_lengths(slot, torch.tensor([9 + 5]))  # committed all 5...
    cache.set_lengths(slot, torch.tensor([9 + 2]))  # ...then cropped back: keep 2 of the 5
    assert int(cache.lengths[0]) == 11
    kept = prefix + draft[:2]

    # fewer new tokens than rejected ones: stale entries at 12..13 remain in memory, past the query positions
    new = [t for t in random_ids(g, vocab, 8).tolist() if t not in draft[2:]][:2]
    logits, _ = ours(torch.tensor([new]), cache, slot)
    ref = hf_run(hf, kept + new)[0]
    close(logits[0], ref[-2:], msg="after crop")
    # the rejected tokens would have given different logits (so the test can see a crop that did not happen)
    wrong = hf_run(hf, prefix + draft + new)[0]
    assert (wrong[-2:] - ref[-2:]).abs().max() > 1e-2
    cache.set_lengths(slot, torch.tensor([len(kept) + 2]))
    kept += new

    # a further step reads positions that still hold rejected K/V only if the crop were ignored
    more = random_ids(g, vocab, 3).tolist()
    logits, _ = ours(torch.tensor([more]), cache, slot)
    close(logits[0], hf_run(hf, kept + more)[0][-3:], msg="step after crop")

    # crop to zero new tokens of a block (reject everything), then continue
    cache.set_lengths(slot, torch.tensor([len(kept)]))
    again = random_ids(g, vocab, 4).tolist()
    logits, _ = ours(torch.tensor([again]), cache, slot)
    close(logits[0], hf_run(hf, kept + again)[0][-4:], msg="after full rejection")


# ----------------------------------------------------------------------------------------------------------------------
# 5. Hidden-state capture: the z-lab convention
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["qwen3", "llama"])
@torch.no_grad()
def test_taps_follow_zlab_convention(make_pair, models, name):
    """With the drafter's own target_layer_ids, the features are z-lab's extract_context_feature:
    cat(hidden_states[i + 1] for i in target_layer_ids), over prefill and decode steps alike."""
    ours, hf = models(name)
    drafter_cfg = ckpt.load_drafter_config(make_pair(**VARIANTS[name])[1])
    ids_layers = drafter_cfg.target_layer_ids
    assert ids_layers == ckpt.default_target_layer_ids(ours.cfg.num_hidden_layers, drafter_cfg.num_hidden_layers)
    assert max(ids_layers) < ours.cfg.num_hidden_layers - 1  # z-lab defaults never tap the last layer
    ours.tap_layer_ids = list(ids_layers)
    g = torch.Generator().manual_seed(41)
    ids = random_ids(g, ours.cfg.vocab_size, 20)
    cache = ours.new_cache(1, 32)
    _, f1 = ours(ids[None, :12], cache, torch.tensor([0]), tap=True)
    cache.set_lengths(torch.tensor([0]), torch.tensor([12]))
    _, f2 = ours(ids[None, 12:], cache, torch.tensor([0]), tap=True)
    out = hf(ids[None], output_hidden_states=True, use_cache=False)
    expected = torch.cat([out.hidden_states[i + 1] for i in ids_layers], dim=-1)[0]
    close(torch.cat([f1[0], f2[0]]), expected, msg="z-lab context features")
    assert f1.shape[-1] == drafter_cfg.hidden_size * len(ids_layers) == ckpt.drafter_tensor_shapes(drafter_cfg)["fc.weight"][1]


# ----------------------------------------------------------------------------------------------------------------------
# 4. The drafter against a plain re-implementation
# ----------------------------------------------------------------------------------------------------------------------


def ref_rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def ref_rope(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, scaling: float = 1.0) -> torch.Tensor:
    """x [T, heads, D] rotated at absolute positions [T] (rotate-half convention, as Qwen3/Llama)."""
    angles = positions.float()[:, None] * inv_freq[None, :]  # [T, D/2]
    cos = (torch.cat([angles, angles], -1).cos() * scaling)[:, None, :]
    sin = (torch.cat([angles, angles], -1).sin() * scaling)[:, None, :]
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def ref_linear(x: torch.Tensor, lin: torch.nn.Linear) -> torch.Tensor:
    y = x @ lin.weight.T
    return y + lin.bias if lin.bias is not None else y


@torch.no_grad()
def ref_drafter(d: DFlashDrafter, context: torch.Tensor, block: torch.Tensor, inv_freq: torch.Tensor,
                scaling: float = 1.0, causal_block: bool = False, blind_to_context: bool = False) -> torch.Tensor:
    """One sequence, no cache: context features [c, n*H] at positions 0..c-1, block embeddings [B, H] at c..c+B-1.
    Returns the final-normed block hidden states [B, H]."""
    cfg = d.cfg
    eps, heads, kv_heads, hd = cfg.rms_norm_eps, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    c, b = context.shape[0], block.shape[0]
    pos_c, pos_b = torch.arange(c), torch.arange(c, c + b)
    ctx = ref_rms(ref_linear(context, d.fc), d.hidden_norm.weight, eps)
    h = block
    for layer in d.layers:
        a = layer.self_attn
        x = ref_rms(h, layer.input_layernorm.weight, eps)
        q = ref_rope(ref_rms(ref_linear(x, a.q_proj).view(b, heads, hd), a.q_norm.weight, eps), pos_b, inv_freq, scaling)
        k_c = ref_rope(ref_rms(ref_linear(ctx, a.k_proj).view(c, kv_heads, hd), a.k_norm.weight, eps), pos_c, inv_freq, scaling)
        k_b = ref_rope(ref_rms(ref_linear(x, a.k_proj).view(b, kv_heads, hd), a.k_norm.weight, eps), pos_b, inv_freq, scaling)
        v_c = ref_linear(ctx, a.v_proj).view(c, kv_heads, hd)
        v_b = ref_linear(x, a.v_proj).view(b, kv_heads, hd)
        keys = torch.cat([k_c, k_b]).repeat_interleave(heads // kv_heads, dim=1)  # [c+B, heads, hd]
        values = torch.cat([v_c, v_b]).repeat_interleave(heads // kv_heads, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, keys) / math.sqrt(hd)  # [heads, B, c+B]
        if causal_block:
            scores[:, :, c:] = scores[:, :, c:].masked_fill(torch.ones(b, b, dtype=torch.bool).triu(1), float("-inf"))
        if blind_to_context:
            scores[:, :, :c] = float("-inf")
        probs = torch.softmax(scores, dim=-1)
        attn = torch.einsum("hqk,khd->qhd", probs, values).reshape(b, heads * hd)
        h = h + ref_linear(attn, a.o_proj)
        y = ref_rms(h, layer.post_attention_layernorm.weight, eps)
        mlp = layer.mlp
        h = h + ref_linear(F.silu(ref_linear(y, mlp.gate_proj)) * ref_linear(y, mlp.up_proj), mlp.down_proj)
    return ref_rms(h, d.norm.weight, eps)


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def drafter_setup(request, make_pair, models):
    """(drafter, inv_freq, scaling): the RoPE oracle is transformers' rotary embedding of the *target* (z-lab drafters
    share the target's RoPE), and for the default type also the textbook formula."""
    name = request.param
    drafter = DFlashDrafter.from_pretrained(make_pair(**VARIANTS[name])[1], dtype=torch.float32)
    _, hf = models(name)
    inv_freq = hf.model.rotary_emb.inv_freq.float()
    scaling = float(hf.model.rotary_emb.attention_scaling)
    if name == "qwen3":
        d, theta = drafter.cfg.head_dim, drafter.cfg.rope["rope_theta"]
        close(inv_freq, 1.0 / theta ** (torch.arange(0, d, 2).float() / d), atol=0, rtol=1e-6, msg="textbook RoPE")
    assert drafter.cfg.num_key_value_heads < drafter.cfg.num_attention_heads  # GQA exercised
    return drafter, inv_freq, scaling


def _features(g: torch.Generator, d: DFlashDrafter, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, len(d.cfg.target_layer_ids) * d.cfg.hidden_size, generator=g)


@torch.no_grad()
def test_drafter_rope_matches_target(drafter_setup):
    drafter, inv_freq, scaling = drafter_setup
    close(drafter.rotary.inv_freq, inv_freq, atol=0, rtol=1e-6, msg="drafter RoPE vs target RoPE")
    assert drafter.rotary.attention_scaling == pytest.approx(scaling)


@torch.no_grad()
def test_drafter_single_sequence(drafter_setup):
    d, inv_freq, scaling = drafter_setup
    g = torch.Generator().manual_seed(51)
    c, b, hidden = 11, 8, d.cfg.hidden_size
    ctx = _features(g, d, c)
    block = torch.randn(b, hidden, generator=g)
    cache = d.new_cache(1, 64)
    slot = torch.tensor([0])
    out = d(block[None], torch.arange(c, c + b)[None], ctx[None], torch.tensor([c]), cache, slot)
    assert out.shape == (1, b, hidden)
    expected = ref_drafter(d, ctx, block, inv_freq, scaling)
    close(out[0], expected, msg="drafter one-shot")
    assert int(cache.lengths[0]) == 0, "forward must not advance lengths"

    # the mask semantics are visible: a causal block or a context-blind block would give different answers
    causal = ref_drafter(d, ctx, block, inv_freq, scaling, causal_block=True)
    assert (causal - expected).abs().max() > 1e-2
    blind = ref_drafter(d, ctx, block, inv_freq, scaling, blind_to_context=True)
    assert (blind - expected).abs().max() > 1e-2
    # and positions matter (RoPE at absolute positions): the same block one position later differs
    shifted = d(block[None], torch.arange(c + 1, c + 1 + b)[None], ctx[None], torch.tensor([c]), d.new_cache(1, 64), slot)
    assert (shifted[0] - expected).abs().max() > 1e-3


@torch.no_grad()
def test_drafter_ragged_batch(drafter_setup):
    d, inv_freq, scaling = drafter_setup
    g = torch.Generator().manual_seed(52)
    counts = [5, 12, 1, 9]
    b, hidden = 6, d.cfg.hidden_size
    c = max(counts)
    ctx = _features(g, d, len(counts), c)  # right padding is random garbage
    blocks = torch.randn(len(counts), b, hidden, generator=g)
    positions = torch.stack([torch.arange(n, n + b) for n in counts])
    slots = torch.tensor([4, 1, 0, 2])
    cache = d.new_cache(5, 32)
    out = d(blocks, positions, ctx, torch.tensor(counts), cache, slots)
    for j, n in enumerate(counts):
        close(out[j], ref_drafter(d, ctx[j, :n], blocks[j], inv_freq, scaling), msg=f"ragged drafter seq {j}")
    # the same again with the host-side max_length given
    out2 = d(blocks, positions, ctx, torch.tensor(counts), d.new_cache(5, 32), slots, max_length=c)
    close(out2, out, atol=1e-6, rtol=1e-6, msg="max_length")


@torch.no_grad()
def test_drafter_persistent_context_cache(drafter_setup):
    """Context given over several calls (the persistent context cache) equals the one-shot reference on all the
    context so far; block K/V do not persist: after each call, only the context count is committed and a different
    block next time sees none of the previous block."""
    d, inv_freq, scaling = drafter_setup
    g = torch.Generator().manual_seed(53)
    b, hidden = 5, d.cfg.hidden_size
    chunks = [[7, 3, 10], [2, 6, 1], [0, 4, 3], [3, 0, 0]]  # per call, per sequence (0: nothing new verified)
    n = len(chunks[0])
    total = [sum(col) for col in zip(*chunks)]
    full = _features(g, d, n, max(total))
    slots = torch.tensor([2, 0, 1])
    cache = d.new_cache(3, 64)
    done = [0] * n
    for step, counts in enumerate(chunks):
        c = max(counts)
        ctx = _features(g, d, n, c)  # garbage padding
        for j in range(n):
            ctx[j, :counts[j]] = full[j, done[j]:done[j] + counts[j]]
        seen = [done[j] + counts[j] for j in range(n)]
        blocks = torch.randn(n, b, hidden, generator=g)
        positions = torch.stack([torch.arange(s, s + b) for s in seen])
        before = cache.lengths[slots].clone()
        out = d(blocks, positions, ctx, torch.tensor(counts), cache, slots)
        assert torch.equal(cache.lengths[slots], before)
        for j in range(n):
            expected = ref_drafter(d, full[j, :seen[j]], blocks[j], inv_freq, scaling)
            close(out[j], expected, msg=f"call {step} seq {j}")
        cache.set_lengths(slots, cache.lengths[slots] + torch.tensor(counts))
        assert cache.lengths[slots].tolist() == seen  # grew by the context counts only, not by the block
        done = seen

    # redraft at the same place with a different block (nothing new verified): still the reference, i.e. the previous
    # block left nothing behind that this one attends to
    blocks = torch.randn(n, b, hidden, generator=g)
    positions = torch.stack([torch.arange(s, s + b) for s in done])
    out = d(blocks, positions, _features(g, d, n, 0), torch.zeros(n, dtype=torch.long), cache, slots)
    for j in range(n):
        close(out[j], ref_drafter(d, full[j, :done[j]], blocks[j], inv_freq, scaling), msg=f"redraft seq {j}")
    assert cache.lengths[slots].tolist() == done


@torch.no_grad()
def test_drafter_roundtrip_save_load(tmp_path, drafter_setup):
    """save_pretrained + from_pretrained gives the same drafter (z-lab format: config + safetensors)."""
    d, _, _ = drafter_setup
    d.save_pretrained(tmp_path / "copy")
    raw = json.loads((tmp_path / "copy" / ckpt.CONFIG_NAME).read_text())
    assert raw["architectures"] == [ckpt.DRAFTER_ARCHITECTURE]
    assert raw["dflash_config"]["target_layer_ids"] == d.cfg.target_layer_ids
    again = DFlashDrafter.from_pretrained(tmp_path / "copy", dtype=torch.float32)
    for (k1, v1), (k2, v2) in zip(d.state_dict().items(), again.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2), k1
    assert torch.equal(again.rotary.inv_freq, d.rotary.inv_freq)
