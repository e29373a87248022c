"""A tiny random target + drafter pair (and a tokenizer), made locally: the embedded default and the test models.

Families: qwen3 and llama (dflash-trt's native decoder; weights written directly) and gpt_oss (a transformers
GptOssForCausalLM, run by the transformers-backed target: hidden 64, 4 layers alternating sliding (window 8) / full
attention, attention sinks, 4 experts top-2; made with transformers and saved with safetensors).

Weights are scaled so logits are O(1) with clear gaps between candidates: argmax decisions are then far from float
noise, which is what lets the tests demand token-for-token equality. Random models accept few drafts; issue-3's
trained pair is what measures acceptance.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import torch

from dflash_trt import checkpoint as ckpt
from dflash_trt.errors import CheckpointError, ConfigError

EOS_TOKEN, MASK_TOKEN = "<|endoftext|>", "<|mask|>"

_CORPUS = [
    "Speculative decoding drafts several tokens cheaply and verifies them with one forward of the target model.",
    "DFlash drafts a whole block in a single pass: a small diffusion drafter conditioned on the target's hidden states.",
    "The answer is 42. Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    "Write a short poem about the sea. The waves roll in, the waves roll out, and the gulls cry over the harbour.",
    "1 + 1 = 2, 2 + 2 = 4, 3 + 3 = 6, 4 + 4 = 8, 5 + 5 = 10, 6 + 6 = 12, 7 + 7 = 14.",
]


def make_tokenizer(directory: str | os.PathLike, vocab_size: int = 320):
    """A byte-level BPE trained on a few built-in sentences, saved for transformers' AutoTokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS_TOKEN, MASK_TOKEN],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS_TOKEN, mask_token=MASK_TOKEN, pad_token=EOS_TOKEN)
    fast.save_pretrained(str(directory))
    return fast


def _target_hf_config(family: str, vocab_size: int, hidden: int, layers: int, heads: int, kv_heads: int,
                      head_dim: int, intermediate: int, tie: bool, eos_id: int, dtype: str):
    from transformers import LlamaConfig, Qwen3Config

    common = dict(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                  num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim, rms_norm_eps=1e-6,
                  max_position_embeddings=4096, tie_word_embeddings=tie, eos_token_id=eos_id, bos_token_id=None,
                  pad_token_id=None)
    if family == "qwen3":
        cfg = Qwen3Config(**common, rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0})
        cfg.architectures = ["Qwen3ForCausalLM"]
    elif family == "llama":
        cfg = LlamaConfig(**common, rope_parameters={"rope_type": "llama3", "rope_theta": 500_000.0, "factor": 8.0,
                                                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                     "original_max_position_embeddings": 256})
        cfg.architectures = ["LlamaForCausalLM"]
    else:
        raise ConfigError(f"family {family!r} is not supported; use 'qwen3', 'llama' or 'gpt_oss'")
    cfg.dtype = dtype
    return cfg


def gpt_oss_config(*, vocab_size: int, eos_id: int, hidden: int = 64, layers: int = 4, heads: int = 4,
                   kv_heads: int = 2, head_dim: int = 16, intermediate: int = 64, experts: int = 4, top_k: int = 2,
                   sliding_window: int = 8, dtype: str = "float32"):
    """A tiny GptOssConfig: attention sinks, alternating sliding/full attention, YaRN, `experts` experts (top_k) with
    biases, untied head."""
    from transformers import GptOssConfig

    if layers % 2:
        raise ConfigError(f"a gpt_oss target alternates sliding and full attention layers: layers must be even, "
                          f"got {layers}")
    cfg = GptOssConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                       num_key_value_heads=kv_heads, head_dim=head_dim, max_position_embeddings=4096,
                       eos_token_id=eos_id, bos_token_id=None, pad_token_id=None, rms_norm_eps=1e-6,
                       intermediate_size=intermediate, num_local_experts=experts, num_experts_per_tok=top_k,
                       sliding_window=sliding_window, layer_types=["sliding_attention", "full_attention"] * (layers // 2),
                       tie_word_embeddings=False)
    cfg.architectures = ["GptOssForCausalLM"]
    cfg.dtype = dtype
    return cfg


@torch.no_grad()
def scale_weights(model, seed: int) -> None:
    """transformers' init (std 0.02) gives near-uniform logits; scale every weight of a transformers model as the
    native tiny targets are made: logits O(1) with clear gaps (argmax far from float noise)."""
    g = torch.Generator().manual_seed(seed)
    gpt_oss = getattr(model.config, "model_type", "") == "gpt_oss"
    for name, p in model.named_parameters():
        if p.dim() == 1:
            base = 1.0 if ("norm" in name or name.endswith("scale")) else 0.0
            p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
        elif "embed_tokens" in name:
            p.copy_(torch.randn(p.shape, generator=g))
        else:  # fan-in scaling; gpt-oss stores its experts [E, in, out]
            fan_in = p.shape[1] if (gpt_oss and "experts" in name) else p.shape[-1]
            p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
        if name.endswith("sinks"):
            p.copy_(torch.randn(p.shape, generator=g))


def make_hf_target(directory: str | os.PathLike, config, *, seed: int = 0) -> Path:
    """A random transformers model of `config` (the class config.architectures names), scaled by scale_weights and
    saved with safetensors."""
    import transformers

    directory = Path(directory)
    torch.manual_seed(seed)
    model = getattr(transformers, config.architectures[0])(config).eval()
    scale_weights(model, seed)
    dtype = getattr(config, "dtype", None)
    if isinstance(dtype, str) and dtype in ckpt.DTYPES:
        model = model.to(ckpt.DTYPES[dtype])
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # its "Writing model shards" bar for one small file
    try:
        model.save_pretrained(str(directory), safe_serialization=True)
    finally:
        if bar:
            hf_logging.enable_progress_bar()
    if not (directory / "model.safetensors").is_file():
        raise CheckpointError(f"transformers wrote no model.safetensors in {directory}")
    return directory


def _random_tensors(shapes: dict[str, tuple[int, ...]], generator: torch.Generator) -> dict[str, torch.Tensor]:
    out = {}
    for name, shape in shapes.items():
        if len(shape) == 1:  # norms (ones, slightly jittered so a wrong norm shows) and biases
            base = 1.0 if name.endswith("norm.weight") else 0.0
            out[name] = base + 0.1 * torch.randn(shape, generator=generator)
        elif "embed_tokens" in name:
            out[name] = torch.randn(shape, generator=generator)
        else:  # fan-in scaling keeps the residual stream O(1); lm_head then gives O(1) logits
            out[name] = torch.randn(shape, generator=generator) / math.sqrt(shape[1])
    return out


def make_target(directory: str | os.PathLike, *, family: str = "qwen3", vocab_size: int, eos_id: int, hidden: int = 64,
                layers: int = 6, heads: int = 4, kv_heads: int = 2, head_dim: int = 16, intermediate: int = 128,
                tie: bool = False, dtype: str = "float32", seed: int = 0) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    hf = _target_hf_config(family, vocab_size, hidden, layers, heads, kv_heads, head_dim, intermediate, tie, eos_id, dtype)
    hf.save_pretrained(str(directory))
    cfg = ckpt.load_target_config(directory)
    g = torch.Generator().manual_seed(seed)
    tensors = _random_tensors(ckpt.target_tensor_shapes(cfg), g)
    from safetensors.torch import save_file

    save_file({k: v.to(ckpt.DTYPES[dtype]).contiguous() for k, v in tensors.items()}, str(directory / ckpt.WEIGHTS_NAME),
              metadata={"format": "pt"})
    return directory


# A tiny DFlash2 drafter's fields (vLLM qwen3_dflash2.py's config names).
DFLASH2_TINY = {"conv_kernel_size": 2, "conv_group_size": 16, "selector_rank": 8, "selector_top_k": 4}


def make_drafter(directory: str | os.PathLike, target_dir: str | os.PathLike, *, mask_token_id: int, layers: int = 2,
                 block_size: int = 16, target_layer_ids: list[int] | None = None, seed: int = 1,
                 layer_types: list[str] | None = None, sliding_window: int | None = None,
                 is_causal: bool | None = None, dflash2: bool | dict | None = None) -> Path:
    """A random drafter for the target. dflash2: True (or a dict of DFlash2 fields overriding DFLASH2_TINY) writes a
    DFlash2DraftModel: convolutions whose tap 0 is near identity, and a selector whose pairwise term is O(1), on the
    scale of the head's logits, so its path differs from the per-slot argmax."""
    target = ckpt.load_target_config(target_dir)
    fields = None
    if dflash2:
        fields = {**DFLASH2_TINY, **(dflash2 if isinstance(dflash2, dict) else {})}
    cfg = ckpt.new_drafter_config(target, num_hidden_layers=layers, block_size=block_size, mask_token_id=mask_token_id,
                                  target_layer_ids=target_layer_ids, layer_types=layer_types,
                                  sliding_window=sliding_window, is_causal=is_causal, dflash2=fields)
    g = torch.Generator().manual_seed(seed)
    tensors = _random_tensors(ckpt.drafter_tensor_shapes(cfg), g)
    for name, t in tensors.items():
        if name.endswith("base_kernel"):  # [2, taps, H]: tap 0 ~ 1, the others ~ 0.3
            t.mul_(0.3)
            t[:, 0] += 1.0
        elif name.endswith("kernel_projection.weight"):  # dynamic part ~ 0.2
            t.mul_(0.2)
        elif name.endswith("_codebook"):  # [V, r]: entries ~ r^-1/4, so the rank-r edge term is O(1)
            t.mul_(math.sqrt(t.shape[1]) * t.shape[1] ** -0.25)
    ckpt.save_drafter(directory, cfg, {k: v.to(cfg.dtype) for k, v in tensors.items()})
    return Path(directory)


def make_tiny_pair(output: str | os.PathLike, *, family: str = "qwen3", seed: int = 0, block_size: int = 16,
                   dtype: str = "float32", **target_kwargs) -> tuple[Path, Path]:
    """output/target (HF checkpoint + tokenizer) and output/drafter (z-lab format)."""
    output = Path(output)
    if block_size < 2:
        raise ConfigError(f"block_size must be an integer >= 2, got {block_size!r}")
    if output.exists() and not output.is_dir():
        raise CheckpointError(f"--output {str(output)!r} exists and is a file; pass a directory path")
    target_dir, drafter_dir = output / "target", output / "drafter"
    with ckpt.atomic_directory(output) as tmp:  # a failed run leaves no half pair behind
        tok = make_tokenizer(tmp / "target")
        taps = None  # z-lab's default spacing
        if family == "gpt_oss":
            hf = gpt_oss_config(vocab_size=len(tok), eos_id=tok.eos_token_id, dtype=dtype, **target_kwargs)
            make_hf_target(tmp / "target", hf, seed=seed)
            # z-lab's spacing repeats a layer over 4 target layers: tap a sliding layer, a middle one and the last
            layers = hf.num_hidden_layers
            taps = sorted({0, layers // 2, layers - 1})
        else:
            make_target(tmp / "target", family=family, vocab_size=len(tok), eos_id=tok.eos_token_id, dtype=dtype,
                        seed=seed, **target_kwargs)
        make_drafter(tmp / "drafter", tmp / "target", mask_token_id=tok.mask_token_id, block_size=block_size,
                     target_layer_ids=taps, seed=seed + 1)
        (tmp / "README.md").write_text(
            f"Tiny random {family} target + DFlash drafter made by `dflash-trt make-tiny-pair` (seed {seed}). "
            "Random weights: for plumbing and losslessness tests, not for acceptance numbers.\n")
        (tmp / "pair.json").write_text(json.dumps({"family": family, "seed": seed, "block_size": block_size}) + "\n")
    return target_dir, drafter_dir
