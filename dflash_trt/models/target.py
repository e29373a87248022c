"""The target: a Qwen3 / Llama decoder with what speculative decoding needs.

One `forward` serves prefill, AR decode and block verification: T new tokens per sequence for a batch of sequences
at different lengths, each written into the KV cache at its own length, causal attention over cache + new tokens, and
(optionally) the hidden states after the layers in `tap_layer_ids` returned in the same pass, concatenated in that
order — the DFlash context features. Tap i is exactly transformers' `hidden_states[i + 1]`: the output of layer i, and
for the last layer that output after the final norm (transformers returns it so, and z-lab trains on it). Parameter names mirror Hugging Face's so checkpoints load as they are.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from dflash_trt import checkpoint as ckpt
from dflash_trt.models.kv_cache import KVCache, slot_span
from dflash_trt.models.layers import (Attention, Fused, RMSNorm, RotaryEmbedding, SwiGLU, attention, causal_attention,
                                     forward_positions, span_visible)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ckpt.DecoderShape, qk_norm: bool, mlp_bias: bool):
        super().__init__()
        self.self_attn = Attention(cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                                   cfg.attention_bias, qk_norm, cfg.rms_norm_eps)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size, mlp_bias)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class _Backbone(nn.Module):
    def __init__(self, cfg: ckpt.TargetConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, cfg.qk_norm, cfg.mlp_bias) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class TargetModel(nn.Module):
    tree_verify = True  # forward(tree=...) verifies draft trees (HfTarget too, unless it has linear-attention layers)

    def __init__(self, cfg: ckpt.TargetConfig):
        super().__init__()
        self.cfg = cfg
        self.model = _Backbone(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        with torch.device("cpu"):  # a real buffer even when the weights are built on the meta device
            self.rotary = RotaryEmbedding(cfg.head_dim, cfg.rope, cfg.hf_config)
        self.tap_layer_ids: list[int] = []
        self.head: Fused | None = None  # the LM head in the inference layout (fuse())

    # ---- loading ---------------------------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, dtype: torch.dtype | None = None,
                        device: str | torch.device = "cpu", cfg: ckpt.TargetConfig | None = None) -> "TargetModel":
        cfg = cfg or ckpt.load_target_config(directory)
        tensors = ckpt.load_target_tensors(directory, cfg)
        return cls.from_tensors(cfg, tensors, dtype, device)

    @classmethod
    def from_tensors(cls, cfg: ckpt.TargetConfig, tensors: dict[str, torch.Tensor], dtype: torch.dtype | None = None,
                     device: str | torch.device = "cpu") -> "TargetModel":
        dtype = dtype or cfg.dtype
        with torch.device("meta"):  # no throw-away random init of billions of parameters
            model = cls(cfg)
        expected = ckpt.target_tensor_shapes(cfg)
        state = {name: tensors[name].to(device=device, dtype=dtype) for name in expected}
        if cfg.tie_word_embeddings:
            state["lm_head.weight"] = state["model.embed_tokens.weight"]
        model.load_state_dict(state, strict=True, assign=True)
        model.rotary.to(device)
        return model.eval()

    def fuse(self) -> "TargetModel":
        """Inference layout (layers.Fused): one GEMM for q/k/v and one for gate/up per layer, weights stored
        transposed on CPU (the LM head too: a copy when it is tied to the embedding, which needs its own layout). The
        engine calls it once after loading."""
        transposed = self.lm_head.weight.device.type == "cpu"
        for layer in self.model.layers:
            layer.self_attn.fuse(transposed)
            layer.mlp.fuse(transposed)
        if transposed and type(self.lm_head) is nn.Linear:
            self.head = Fused(self.lm_head.weight.detach().t().contiguous(), None, True)
        return self

    # ---- what the drafter borrows ----------------------------------------------------------------------------------

    def embed(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens(token_ids)

    def logits(self, normed_hidden: torch.Tensor) -> torch.Tensor:
        return self.head(normed_hidden) if self.head is not None else self.lm_head(normed_hidden)

    def cache_shapes(self) -> list[tuple[int, int, int]]:
        """(layers, kv_heads, head_dim) of the KV cache, for TorchEngine's memory check."""
        return [(self.cfg.num_hidden_layers, self.cfg.num_key_value_heads, self.cfg.head_dim)]

    def state_bytes_per_slot(self) -> int:
        """Per-slot memory besides the KV cache (hybrid targets' recurrent states): none here."""
        return 0

    def new_cache(self, max_batch: int, capacity: int, device=None) -> KVCache:
        weight = self.model.embed_tokens.weight
        return KVCache(self.cfg.num_hidden_layers, max_batch, capacity, self.cfg.num_key_value_heads, self.cfg.head_dim,
                       weight.dtype, device or weight.device)

    # ---- forward ---------------------------------------------------------------------------------------------------

    def forward(self, input_ids: torch.Tensor, cache: KVCache, slots: torch.Tensor, *,
                logits_at: torch.Tensor | None = None, tap: bool = False, max_length: int | None = None,
                host_slots: list[int] | slice | tuple | None = None,
                tree: tuple[torch.Tensor, torch.Tensor] | None = None, fresh: bool = False):
        """Run T new tokens per sequence.

        input_ids [N, T]: sequence n's tokens go to positions cache.lengths[slots[n]] + 0..T-1 (right padding is fine:
        padded entries land past the valid ones, causality hides them, and the caller's `set_lengths` never keeps them).
        logits_at [N, K]: which of the T positions need logits (default: all) — prefill only needs the last one.
        max_length: the host-side max of lengths + T if the caller knows it (saves a device sync). host_slots: `slots`
        as a host list, if the caller has it (consecutive slots are then read from the cache without a copy), or as a
        slice of consecutive slots.
        tree (depth [N, T], ancestors [N, T, T] bool): the T tokens are the nodes of a draft tree (spec/tree.py): token
        i is still written at position start + i, but its RoPE position is start + depth[i] and it attends to the cache
        before start and to the nodes j with ancestors[:, i, j] (the tree attention mask) instead of to 0..i.
        fresh: the slots' caches are empty (a prefill): on CUDA the tokens attend causally among themselves through
        `causal_attention` (no mask, no cache read; PyTorch's choice for the masked call, cuDNN, builds a plan for every
        new prompt length), elsewhere as any forward.
        Returns (logits [N, K, V], features [N, T, len(tap_layer_ids) * hidden] or None). Lengths are not advanced.
        """
        t = input_ids.shape[1]
        start = cache.lengths[slots]
        upto = max_length if max_length is not None else int(start.max()) + t
        pos = forward_positions(start, t, upto, tree)
        h = self.embed(input_ids)
        cos, sin = self.rotary(pos.rope, h.dtype)
        where = cache.where(slots, pos.write)
        rows, within = slot_span(slots, host_slots)  # rows of other slots between them: read, not gathered
        visible = pos.visible if within is None else span_visible(pos.visible, within, rows.stop - rows.start)
        taps: dict[int, torch.Tensor] = {}
        causal = fresh and tree is None and h.device.type == "cuda"
        for i, layer in enumerate(self.model.layers):
            x = layer.input_layernorm(h)
            q, k, v = layer.self_attn.project_qkv(x, cos, sin)
            cache.write(i, where, k, v)
            if causal:
                a = causal_attention(q, k, v, layer.self_attn.scale)
            else:
                keys, values = cache.read(i, rows, upto)
                a = attention(q, keys, values, visible, layer.self_attn.scale, within)
            h = h + layer.self_attn.out(a)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
            if tap and i in self.tap_layer_ids:
                taps[i] = h
        last = len(self.model.layers) - 1
        if last in taps:  # transformers' hidden_states[L] is the last layer's output *after* the final norm
            h = taps[last] = self.model.norm(h)
        features = torch.cat([taps[i] for i in self.tap_layer_ids], dim=-1) if tap else None
        if logits_at is not None:
            h = torch.gather(h, 1, logits_at[..., None].expand(-1, -1, h.shape[-1]))
        return self.logits(h if last in taps else self.model.norm(h)), features


def load_target(directory: str | os.PathLike, dtype: torch.dtype | None = None, device: str | torch.device = "cpu",
                cfg: ckpt.TargetConfig | None = None):
    """The target of a checkpoint directory, on the path config.json picks (checkpoint.TARGET_ARCHITECTURES): the
    native decoder (TargetModel) for Qwen3 / Llama, the family's own transformers module (HfTarget) for the others.
    Every place that loads a target from a directory goes through here."""
    cfg = cfg or ckpt.load_target_config(directory)
    if cfg.backend == "native":
        return TargetModel.from_pretrained(directory, dtype, device, cfg)
    from dflash_trt.models.hf_target import HfTarget

    return HfTarget.from_pretrained(directory, dtype, device, cfg)
