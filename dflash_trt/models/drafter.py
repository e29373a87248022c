"""The DFlash drafter (z-lab architecture and checkpoint format).

A small Qwen3-style decoder with no embedding and no LM head of its own (it borrows the target's). Each draft is one
forward over a block `[last verified token, MASK x (B-1)]`:

* context features = hidden_norm(fc(concat of target hidden states at target_layer_ids)) for the tokens the target
  verified since the last draft;
* KV injection: every layer projects those features with its *own* k_proj/v_proj (+ k_norm, RoPE at the tokens'
  absolute positions) and appends them to its context cache, which persists across steps;
* only block tokens make queries; they see all context K/V plus every block token (non-causal inside the block);
* block K/V are never cached: they are recomputed each draft and dropped.

Sliding-window layers (config `layer_types` entry "sliding_attention", window W = `sliding_window`). The rule is
z-lab's reference under flash-attention, derived from:
* z-lab/dflash dflash/model.py (snapshot 44947fb, 2026-04-26), Qwen3DFlashAttention: `self.is_causal = False`
  (l.194); `self.sliding_window = config.sliding_window` for sliding layers (l.209); keys/values are
  `cat([k_ctx, k_noise])` (l.230-231) appended to the draft cache (l.238), which dflash_generate crops back to the
  committed context after each draft (`past_key_values_draft.crop(start)`, l.120), so key index j holds absolute position j
  and the block's B keys are the last ones; the call passes `sliding_window=self.sliding_window` and
  `is_causal=False` to ALL_ATTENTION_FUNCTIONS[config._attn_implementation] (l.240-251, l.118).
* transformers' _flash_attention_forward (modeling_flash_attention_utils.py): when key length > W it calls flash-attn
  with `window_size = (W - 1, W - 1)`; flash-attn aligns the q_len queries to the END of the k_len keys, so query i
  sees key j iff -(W-1) <= j - (i + k_len - q_len) <= W-1. With z-lab's layout i + k_len - q_len is the query's
  absolute position p, hence: a block query at position p sees a key (context or block) at position a iff
  |p - a| <= W - 1, i.e. context keys a in [p - W + 1, p) and block keys within W - 1 of p (all of the block when
  W >= B). The same rule is what z-lab's later explicit-mask path builds (`_attention_mask`: query_position - key_position
  < W and, non-causal, key_position - query_position < W). (With key length <= W the window cuts nothing, so the
  "key length > W" condition changes nothing.) The eager/sdpa path of the April snapshot ignores `sliding_window` (no
  mask is built); that is not followed here. Here positions are used directly (cache index = position for context,
  block_positions for the block), which is the same as flash-attn's index rule in z-lab's layout.
* Causality (z-lab's current model.py, commit 1012959, Qwen3DFlashAttention.__init__ and its explicit mask):
  `is_causal = layer_type == "sliding_attention"` when the config has no `is_causal` field, else the field's value
  for every layer. A causal layer's block query at p sees block keys at positions <= p only (context keys are all
  before the block). Published sliding drafters write `is_causal: false` (non-causal, the window on both sides, as
  under flash-attention above); one without the field is causal in its sliding layers, as z-lab serves it.
  Full-attention layers are non-causal unless `is_causal: true`.

DFlash2 drafters (config `architectures: ["DFlash2DraftModel"]`, cfg.dflash2): every layer's attention and MLP sit
between two grouped dynamic convolutions over the block rows (`attention_conv`, `mlp_conv`), the block embeddings are
scaled by `input_embedding_scale`, and `select_drafts` walks the candidate selector; see models/dflash2.py.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from dflash_trt import checkpoint as ckpt
from dflash_trt.models.dflash2 import CandidateSelector, GroupedConv
from dflash_trt.models.kv_cache import KVCache, slot_span
from dflash_trt.models.layers import Fused, RMSNorm, RotaryEmbedding, attention, span_visible, spread
from dflash_trt.models.quant import QuantLinear
from dflash_trt.models.target import DecoderLayer


class DFlashDrafter(nn.Module):
    def __init__(self, cfg: ckpt.DrafterConfig):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList(DecoderLayer(cfg, qk_norm=True, mlp_bias=False) for _ in range(cfg.num_hidden_layers))
        self.fc = nn.Linear(len(cfg.target_layer_ids) * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.fused_fc: Fused | None = None  # fc in the inference layout (fuse())
        with torch.device("cpu"):
            self.rotary = RotaryEmbedding(cfg.head_dim, cfg.rope, cfg.hf_config)
        self.sliding = [cfg.layer_type(i) == "sliding_attention" for i in range(cfg.num_hidden_layers)]
        self.causal = [cfg.layer_causal(i) for i in range(cfg.num_hidden_layers)]
        self._kinds = [(s, c) for s, c in zip(self.sliding, self.causal)]  # what a layer's mask depends on
        if any(self.sliding) and not (isinstance(cfg.sliding_window, int) and cfg.sliding_window >= 1):
            raise ckpt.CheckpointError(f"drafter: sliding_attention layers need sliding_window >= 1, got {cfg.sliding_window!r}")
        self.candidate_selector: CandidateSelector | None = None
        if cfg.dflash2:  # DFlash2 (models/dflash2.py): convs around every sublayer, the candidate selector
            for layer in self.layers:
                for name in ("attention_conv", "mlp_conv"):
                    setattr(layer, name, GroupedConv(cfg.hidden_size, cfg.conv_kernel_size, cfg.conv_group_size,
                                                     cfg.block_size))
            self.candidate_selector = CandidateSelector(cfg.hidden_size, cfg.vocab_size, cfg.selector_rank,
                                                        cfg.selector_top_k, cfg.output_multiplier,
                                                        cfg.final_logit_softcapping)

    @property
    def block_size(self) -> int:
        return self.cfg.block_size

    @property
    def mask_token_id(self) -> int:
        return self.cfg.mask_token_id

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, dtype: torch.dtype | None = None,
                        device: str | torch.device = "cpu", cfg: ckpt.DrafterConfig | None = None) -> "DFlashDrafter":
        cfg = cfg or ckpt.load_drafter_config(directory)
        tensors = ckpt.load_drafter_tensors(directory, cfg)
        dtype = dtype or cfg.dtype
        with torch.device("meta"):
            model = cls(cfg)
        shapes = ckpt.drafter_tensor_shapes(cfg)
        quantized = ckpt.quantized_linear_names(tensors, shapes) if cfg.quantization != "none" else set()
        for module in sorted(quantized):  # ModelOpt-quantized linears: FP8 GEMM where the GPU has it, else dequantized
            parent, _, leaf = module.rpartition(".")
            parts = {suffix: tensors[f"{module}.{suffix}"] for suffix in ("weight", "weight_scale", "weight_scale_2", "input_scale")
                     if f"{module}.{suffix}" in tensors}
            setattr(model.get_submodule(parent) if parent else model, leaf,
                    QuantLinear(cfg.quantization, parts, dtype, torch.device(device)))
        state = {name: tensors[name].to(device=device, dtype=dtype) for name in shapes
                 if name[: -len(".weight")] not in quantized}
        model.load_state_dict(state, strict=False, assign=True)
        missing = [n for n, p in model.named_parameters() if p.is_meta]
        if missing:  # cannot happen after load_drafter_tensors' checks; a loud guard against silent meta weights
            raise ckpt.CheckpointError(f"drafter {directory}: weights {missing[:3]} were not loaded")
        model.rotary.to(device)
        return model.eval()

    def fuse(self) -> "DFlashDrafter":
        """Inference layout (see TargetModel.fuse; fc too); layers quantized by ModelOpt or loaded quantized keep theirs."""
        transposed = self.norm.weight.device.type == "cpu"
        for layer in self.layers:
            layer.self_attn.fuse(transposed)
            layer.mlp.fuse(transposed)
        self.fused_fc = Fused.of(transposed, self.fc)
        return self

    def _fc(self, context: torch.Tensor) -> torch.Tensor:
        plain = self.fused_fc is not None and type(self.fc) is nn.Linear
        return self.hidden_norm(self.fused_fc(context) if plain else self.fc(context))

    def select_drafts(self, hidden: torch.Tensor, logits: torch.Tensor, anchor: torch.Tensor) -> torch.Tensor:
        """DFlash2's drafts: the candidate selector's greedy walk (models/dflash2.py) over the target head's top-K of
        the drafted slots. hidden [n, k-1, H] (block rows 1..k-1 of `forward`), logits [n, k-1, V] (the target head
        on them), anchor [n] (the block's first token) -> drafts [n, k-1].

        The walk is greedy at every temperature. The reference (vLLM dflash2/speculator.py) samples the path at T > 0
        (Gumbel-max over score / T) and hands the realized scores to a q-aware rejection sampler; our verify treats
        every draft as deterministic (one-hot q), which is lossless for any fixed draft, so it needs the greedy walk."""
        if self.candidate_selector is None:
            raise ValueError("select_drafts needs a DFlash2 drafter (candidate_selector)")
        return self.candidate_selector(hidden, logits, anchor)

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        ckpt.save_drafter(directory, self.cfg, dict(self.state_dict()))

    def new_cache(self, max_batch: int, capacity: int, device=None) -> KVCache:
        weight = self.fc.weight
        return KVCache(self.cfg.num_hidden_layers, max_batch, capacity, self.cfg.num_key_value_heads, self.cfg.head_dim,
                       weight.dtype, device or weight.device)

    def forward(self, block_embeds: torch.Tensor, block_positions: torch.Tensor, context: torch.Tensor,
                context_counts: torch.Tensor, cache: KVCache, slots: torch.Tensor, max_length: int | None = None,
                host_slots: list[int] | slice | tuple | None = None, context_from: torch.Tensor | None = None) -> torch.Tensor:
        """One draft for N sequences.

        block_embeds [N, B, H]: target embeddings of the block tokens; block_positions [N, B]: their absolute positions.
        context [N, C, n*H]: target features of the newly verified tokens (right-padded), context_counts [N] how many
        of them are real. Their K/V go into `cache` at each slot's current length; the caller then commits
        lengths += context_counts. max_length: host-side max of lengths + counts, if known (saves a sync). host_slots:
        `slots` as a host list, if known (consecutive slots are then read from the cache without a copy), or as a slice
        of consecutive slots. context_from [N]: each sequence's first cache position that is context (None: 0; the
        engine's AR stretches keep only a window of recent context: spec/step.py).
        Returns the final-normed hidden states [N, B, H]; slot i >= 1 predicts the token at block_positions[:, i].
        """
        n, b, _ = block_embeds.shape
        c = context.shape[1]
        start = cache.lengths[slots]
        new_lengths = start + context_counts
        upto = max_length if max_length is not None else int(new_lengths.max())
        # rows past a sequence's count are padding (masked: its lengths advance by its count only); where the batch's
        # widest count puts them past the cache's end (a sequence near max_seq_len beside one with many pending rows)
        # they go to its last position, past every real one
        context_positions = (start[:, None] + torch.arange(c, device=context.device)).clamp_max(cache.capacity - 1)
        key_positions = torch.arange(upto, device=context.device)
        sees_context = key_positions[None, :] < new_lengths[:, None]
        if context_from is not None:
            sees_context = sees_context & (key_positions[None, :] >= context_from[:, None])
        sees_context = sees_context[:, None, :].expand(n, b, upto)
        sees_block = torch.ones(n, b, b, dtype=torch.bool, device=context.device)  # non-causal inside the block
        visible = torch.cat([sees_context, sees_block], dim=-1)
        masks = {(False, False): visible}
        if any(s or c for s, c in self._kinds):
            key_all = torch.cat([key_positions[None, :].expand(n, upto), block_positions], dim=1)
            for kind in set(self._kinds) - set(masks):
                masks[kind] = visible & self._layer_mask(kind, block_positions, key_all)

        features = self._fc(context)
        cos_c, sin_c = self.rotary(context_positions, block_embeds.dtype)
        cos_b, sin_b = self.rotary(block_positions, block_embeds.dtype)
        h = self._scaled(block_embeds)
        where = cache.where(slots, context_positions)
        rows, within = slot_span(slots, host_slots)  # rows of other slots between them: read, not gathered
        if within is not None:
            masks = {kind: span_visible(m, within, rows.stop - rows.start) for kind, m in masks.items()}
        for i, layer in enumerate(self.layers):
            if c:
                k_ctx, v_ctx = layer.self_attn.project_kv(features, cos_c, sin_c)  # KV injection: this layer's own k/v_proj
                cache.write(i, where, k_ctx, v_ctx)
            k_ctx, v_ctx = cache.read(i, rows, upto)
            h = self._layer(layer, h, k_ctx, v_ctx, cos_b, sin_b, masks[self._kinds[i]], within)
        return self.norm(h)

    def _layer_mask(self, kind: tuple[bool, bool], query_positions: torch.Tensor,
                    key_positions: torch.Tensor) -> torch.Tensor:
        """[N, T], [N, S] -> [N, T, S] for a layer of kind (sliding, causal), by positions (module docstring):
        causal: key <= query; sliding: query - key < W, and, when not causal, key - query < W."""
        sliding, causal = kind
        distance = query_positions[:, :, None] - key_positions[:, None, :]
        mask = distance >= 0 if causal else torch.ones_like(distance, dtype=torch.bool)
        if sliding:
            mask = mask & (distance < self.cfg.sliding_window)
            if not causal:
                mask = mask & (-distance < self.cfg.sliding_window)
        return mask

    def ingest(self, context: torch.Tensor, context_counts: torch.Tensor, cache: KVCache, slots: torch.Tensor) -> None:
        """Write context K/V without drafting: what `forward` does with its context before the block attends to it
        (every layer's own k_proj/v_proj + k_norm + RoPE at the rows' absolute positions, from cache.lengths[slots]).
        context [N, C, n*H], of which context_counts [N] rows are real. The caller commits lengths += counts. Used to
        take a whole prompt's features in at prefill, so that decode steps carry at most K context rows."""
        start = cache.lengths[slots]
        positions = start[:, None] + torch.arange(context.shape[1], device=context.device)
        features = self._fc(context)
        cos, sin = self.rotary(positions, self.norm.weight.dtype)
        where = cache.where(slots, positions)
        for i, layer in enumerate(self.layers):
            k_ctx, v_ctx = layer.self_attn.project_kv(features, cos, sin)
            cache.write(i, where, k_ctx, v_ctx)

    def forward_train(self, block_embeds: torch.Tensor, block_positions: torch.Tensor, context: torch.Tensor,
                      context_positions: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """Training forward without a cache: many blocks per sequence in one pass.

        block_embeds [N, Q, H] (Q = blocks x B), block_positions [N, Q]; context [N, S, n*H] at context_positions
        [N, S]; visible [N, Q, S + Q] says which context entries and which block tokens each query sees (the
        trainer builds it: a block sees context strictly before its anchor and its own tokens, not other blocks).
        Same layers, same KV injection as `forward` — what is trained is exactly what is served (sliding layers add
        the same window on positions to `visible`)."""
        features = self._fc(context)
        cos_c, sin_c = self.rotary(context_positions, block_embeds.dtype)
        cos_b, sin_b = self.rotary(block_positions, block_embeds.dtype)
        masks = {(False, False): visible}
        key_all = torch.cat([context_positions, block_positions], 1)
        for kind in set(self._kinds) - set(masks):
            masks[kind] = visible & self._layer_mask(kind, block_positions, key_all)
        h = self._scaled(block_embeds)
        for i, layer in enumerate(self.layers):
            k_ctx, v_ctx = layer.self_attn.project_kv(features, cos_c, sin_c)
            h = self._layer(layer, h, k_ctx, v_ctx, cos_b, sin_b, masks[self._kinds[i]])
        return self.norm(h)

    def _scaled(self, block_embeds: torch.Tensor) -> torch.Tensor:
        """DFlash2's input_embedding_scale on the block's embeddings (1.0: as given)."""
        scale = self.cfg.input_embedding_scale
        return block_embeds if scale == 1.0 else block_embeds * scale

    @staticmethod
    def _layer(layer, h, k_ctx, v_ctx, cos_b, sin_b, visible, within=None) -> torch.Tensor:
        """One decoder layer for the block tokens: queries from the block only, keys/values = context ++ block.
        DFlash2 layers wrap the attention and the MLP in their convolutions (models/dflash2.py): block rows only.
        within: the context rows are a span of slots (kv_cache.slot_span), the block's rows its rows `within`."""
        attn = layer.self_attn
        attention_conv, mlp_conv = getattr(layer, "attention_conv", None), getattr(layer, "mlp_conv", None)
        x = layer.input_layernorm(h)
        if attention_conv is not None:
            x, after = attention_conv.prepare(x)
        q, k_blk, v_blk = attn.project_qkv(x, cos_b, sin_b)
        if within is not None:
            k_blk, v_blk = spread(k_blk, within, k_ctx.shape[0]), spread(v_blk, within, k_ctx.shape[0])
        out = attn.out(attention(q, torch.cat([k_ctx, k_blk], 1), torch.cat([v_ctx, v_blk], 1), visible, attn.scale,
                                 within))
        h = h + (attention_conv.finish(out, after) if attention_conv is not None else out)
        x = layer.post_attention_layernorm(h)
        if mlp_conv is None:
            return h + layer.mlp(x)
        x, after = mlp_conv.prepare(x)
        return h + mlp_conv.finish(layer.mlp(x), after)
