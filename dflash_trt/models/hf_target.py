"""A target run by its family's own transformers module (gpt-oss, Qwen3-MoE, Gemma 4 text, and the hybrids Qwen3.5,
Qwen3.5-MoE and Qwen3-Next), against the engine's pre-allocated per-slot KV cache.

`HfTarget` is a drop-in for `TargetModel` (same `forward` contract, `embed`, `logits`, `new_cache`, `tap_layer_ids`,
`cfg`, `lm_head`, `rotary`, `fuse`): SpecStep, TorchEngine, the build's gate, bench and train-drafter use it unchanged.
What the family does — attention sinks (gpt-oss), alternating sliding-window / full layers, MoE routing, YaRN or
per-layer-type RoPE, Gemma's scaled embedding, per-layer inputs, KV sharing, final logit softcapping, Qwen3.5's gated
attention and Gated DeltaNet layers — is transformers' own code; dflash-trt supplies three things (four for hybrids):

* the KV cache, `HfKVCache`: a `transformers.cache_utils.Cache` over a store allocated once, one tensor per layer
  `[slot, position, kv_head, head_dim]` (per layer because Gemma 4's full-attention layers have other head counts
  and sizes than its sliding ones; KV-shared layers have none), with one committed length per slot like `KVCache`.
  Its `update` writes the new K/V of every row at that row's own positions and returns positions 0..upto-1 of the
  rows' slots, so attention runs over each row's whole history; what lies past a row's committed length is garbage
  that the masks hide and later writes overwrite. Cropping after a partial acceptance is a smaller length.
* the masks: per row, key position <= query position (causal over cache + new tokens; right padding is therefore
  harmless), and for sliding layers also key position > query position - sliding_window (transformers'
  `sliding_window_overlay`). They are passed as 4-D masks in the form the attention implementation takes (bool for
  sdpa, additive float with finfo.min for eager, as masking_utils makes them), as a dict by layer type for families
  whose model accepts one (gpt-oss, Gemma 4, the hybrids) and as one tensor for single-type models (Qwen3-MoE).
  Transformers returns a prepared 4-D mask as it is.
* positions: `position_ids` [N, T] = each slot's length + 0..T-1, so RoPE is per row (Qwen3.5's multimodal RoPE
  gets the same position in its three sections, as transformers gives text tokens).
* hybrid targets (`linear_attention` layers, Gated DeltaNet): the layers' conv and recurrent states per slot,
  `LinearStates` (models/linear_states.py), behind the part of the Cache interface those layers call
  (get/update_conv_state, get/update_recurrent_state). A forward records each linear layer's input (a forward
  pre-hook) and leaves the state after all T tokens beside the committed one; at the start of the slot's next forward
  the state is brought to the committed length, whatever the engine set it to (a kept verify prefix, a padded
  prefill row's real length): a buffer swap, or a replay of the kept tokens through the same transformers layers. Their
  mask is None (no 2-D padding mask: right padding never reaches a row's state, the rollback drops it). Draft trees
  are not verified (`tree_verify` False): a tree's accepted path is not a prefix of what the layers ran.
* draft trees (`forward(tree=...)`, the non-hybrid families): as TargetModel verifies them — node i written at cache
  position start + i, `position_ids` start + depth[i], masks that show node i the cache before start and its ancestors.
  Sliding layers measure the window in sequence positions (a cache key p < start at p, node j at start + depth[j]), so
  every node sees what a causal forward over its root path sees; KV-shared layers (Gemma 4) read the K/V their source
  layer got back from `update` (the same store, the same rows) under the same per-type masks. The accepted path's K/V
  is then moved into place through `kv_stores()` like the native cache's.

Attention implementation: what transformers picks on its own for the family on CPU, made explicit — sdpa where the
model supports it (Qwen3-MoE, Gemma 4, the hybrids), eager where it does not (gpt-oss: its attention sinks are in its eager
function). Flash / flex attention are never requested (they need masks of their own kind).

Taps are transformers' `hidden_states[i + 1]` exactly (the last after the final norm), from the same forward.

Loading: `AutoModelForCausalLM`-style `from_pretrained` of the family's class (no remote code, safetensors only:
`use_safetensors=True`, and a directory with only pickle weights is refused before transformers sees it), then every
missing, unexpected or mis-shaped tensor is one CheckpointError (transformers' loading info), and every weight must be
finite. A Gemma 4 or Qwen3.5(-MoE) `*ForConditionalGeneration` checkpoint loads its text model only
(`model.language_model.*` mapped to `model.*`, the LM head tied or not by the checkpoint's top-level flag; the vision /
audio towers' tensors are the only ones allowed to be left over; transformers itself skips Qwen's multi-token-prediction
`mtp.*` tensors, which dflash-trt does not use). gpt-oss MXFP4 experts are
loaded by transformers' own MXFP4 integration with `Mxfp4Config(dequantize=True)`: dequantized to the run dtype,
everywhere (its MXFP4 kernels come from the Hugging Face kernels hub at load time, which dflash-trt does not fetch).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import torch
from torch import nn
from transformers.cache_utils import Cache

from dflash_trt import checkpoint as ckpt
from dflash_trt.errors import CheckpointError
from dflash_trt.models.kv_cache import SlotLengths, slot_view
from dflash_trt.models.layers import forward_positions
from dflash_trt.models.linear_states import LinearStates, cache_keyword

# Families whose transformers model takes a dict of masks by layer type (they read attention_mask[layer_type]).
MASK_DICT_FAMILIES = ("gpt_oss", "gemma4", "qwen3_5", "qwen3_5_moe", "qwen3_next")
# Tensors of a *ForConditionalGeneration checkpoint that belong to the towers dflash-trt does not serve.
MULTIMODAL_TOWER_PREFIXES = ("model.vision_tower.", "model.embed_vision.", "model.audio_tower.", "model.embed_audio.",
                             "model.multi_modal_projector.", "model.visual.")


class HfKVCache(SlotLengths, Cache):
    """The engine's KV cache behind transformers' Cache interface (see the module docstring). Same bookkeeping as
    `KVCache`: `lengths` [max_batch], `capacity`, `set_lengths`, `reset`; HfTarget.forward sets which rows and positions
    one forward writes (`begin` / `end`). `linear`: the linear-attention layers' states of a hybrid target."""

    def __init__(self, shapes: list[tuple[int, int] | None], max_batch: int, capacity: int, dtype: torch.dtype,
                 device: torch.device | str, linear: LinearStates | None = None):
        super().__init__(layers=[])
        def store(shape: tuple[int, int] | None) -> torch.Tensor | None:
            return None if shape is None else torch.zeros(max_batch, capacity, *shape, dtype=dtype, device=device)

        self.k_layers = [store(s) for s in shapes]  # per layer [slot, position, kv_head, head_dim], None: KV-shared
        self.v_layers = [store(s) for s in shapes]
        self.lengths = torch.zeros(max_batch, dtype=torch.long, device=device)
        self.capacity = capacity
        self._max_batch = max_batch
        self._where: tuple[torch.Tensor, torch.Tensor] | None = None
        self._rows: torch.Tensor | slice | None = None
        self._upto = 0
        self.linear = linear
        self._linear_rows: tuple[list[int], int] | None = None  # (host slots, T) of the running forward

    @property
    def max_batch(self) -> int:
        return self._max_batch

    def begin(self, slots: torch.Tensor, positions: torch.Tensor, rows: torch.Tensor | slice, upto: int,
              host_slots: list[int] | None = None) -> None:
        """One forward writes rows `slots` at cache positions `positions` [N, T] and attends over positions 0..upto-1
        (which of them, and the RoPE positions, are HfTarget.forward's masks and position_ids: for a draft tree they
        differ from these). A hybrid target's linear-attention states are first brought to the rows' committed lengths
        (one host read of them)."""
        if self.linear is not None:
            host = list(host_slots) if host_slots is not None else slots.tolist()
            self.linear.begin(slots, host, self.lengths[slots].tolist())
            self._linear_rows = (host, positions.shape[1])
        self._where, self._rows, self._upto = (slots[:, None], positions), rows, upto

    def end(self, completed: bool = True) -> None:
        if self.linear is not None and self._linear_rows is not None:
            host, tokens = self._linear_rows
            self.linear.end(host, tokens, completed)
        self._where, self._rows, self._upto, self._linear_rows = None, None, 0, None

    def reset(self) -> None:
        super().reset()
        if self.linear is not None:
            self.linear.reset()

    # linear-attention layers (Gated DeltaNet): their calls go to the per-slot states (models/linear_states.py)

    def _linear(self) -> LinearStates:
        if self.linear is None:
            raise RuntimeError("HfKVCache: a linear-attention layer ran but this cache holds no linear-attention state "
                               "(made for a target without such layers?)")
        return self.linear

    def is_recording_past(self, layer_idx: int) -> bool:
        return self.linear is not None

    def has_previous_state(self, layer_idx: int | None = None, state_idx: int | None = None) -> bool:
        return self.linear is not None

    def get_recurrent_states_to_keep(self, layer_idx: int | None = None) -> int:
        return self._linear().get_recurrent_states_to_keep(layer_idx)

    def get_conv_state(self, layer_idx: int, state_idx: int = 0) -> torch.Tensor:
        return self._linear().get_conv_state(layer_idx, state_idx)

    def get_recurrent_state(self, layer_idx: int, state_idx: int = 0) -> torch.Tensor:
        return self._linear().get_recurrent_state(layer_idx, state_idx)

    def update_conv_state(self, conv_states: torch.Tensor, layer_idx: int, state_idx: int = 0, **kwargs) -> torch.Tensor:
        return self._linear().update_conv_state(conv_states, layer_idx, state_idx, **kwargs)

    def update_recurrent_state(self, recurrent_states: torch.Tensor, layer_idx: int, state_idx: int = 0,
                               **kwargs) -> torch.Tensor:
        return self._linear().update_recurrent_state(recurrent_states, layer_idx, state_idx, **kwargs)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        """key/value_states [N, Hkv, T, D] (transformers' layout) -> written at each row's positions; returns the rows'
        keys/values for positions 0..upto-1 as [N, Hkv, upto, D] views of the store."""
        if self._where is None:
            raise RuntimeError("HfKVCache.update outside HfTarget.forward: this cache is driven by HfTarget only")
        k_store, v_store = self.k_layers[layer_idx], self.v_layers[layer_idx]
        if k_store is None:
            raise RuntimeError(f"HfKVCache: layer {layer_idx} has no KV store (a KV-shared layer wrote to the cache)")
        k_store.index_put_(self._where, key_states.transpose(1, 2))
        v_store.index_put_(self._where, value_states.transpose(1, 2))
        rows, upto = self._rows, self._upto
        return k_store[rows, :upto].transpose(1, 2), v_store[rows, :upto].transpose(1, 2)

    def kv_stores(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(K, V) of each layer that has a store, as [1, slot, position, kv_head, head_dim] views (compact_kv's
        layout; KVCache.kv_stores)."""
        return [(k[None], v[None]) for k, v in zip(self.k_layers, self.v_layers) if k is not None]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """The longest committed length (lengths differ per slot: HfTarget always passes position_ids and masks, so
        transformers never needs this to place tokens)."""
        return int(self.lengths.max())

    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        return self._upto, 0


def _record_linear_input(module: nn.Module, args: tuple, kwargs: dict) -> None:
    """Forward pre-hook of a linear-attention layer: its input, for the rollback (HfKVCache in HfTarget.forward only;
    a replay passes the LinearStates itself and records nothing)."""
    cache = kwargs.get("cache", kwargs.get("cache_params"))  # its name from transformers 5.24 on, and before
    if isinstance(cache, HfKVCache) and cache.linear is not None:
        hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        cache.linear.record(module.layer_idx, hidden)


class NoRotary:
    """HfTarget has no RoPE of its own (transformers' modules apply theirs): SpecStep's `rotary.precompute` is a
    no-op."""

    table = None

    def precompute(self, num_positions: int, dtype: torch.dtype) -> None:
        return None


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' load report, progress bars and warnings go to stderr; a failed load is one CheckpointError."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _model_class(cfg: ckpt.TargetConfig):
    """The family's *ForCausalLM class (for a multimodal checkpoint: the text model's)."""
    import transformers

    name = {"gpt_oss": "GptOssForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM", "gemma4": "Gemma4ForCausalLM",
            "qwen3_5": "Qwen3_5ForCausalLM", "qwen3_5_moe": "Qwen3_5MoeForCausalLM",
            "qwen3_next": "Qwen3NextForCausalLM"}[cfg.family]
    return getattr(transformers, name)


def _attn_implementation(model_class) -> str:
    return "sdpa" if getattr(model_class, "_supports_sdpa", False) else "eager"


def _shown(names) -> str:
    names = sorted(names)
    return ", ".join(names[:5]) + (f" (+{len(names) - 5} more)" if len(names) > 5 else "")


class HfTarget(nn.Module):
    """A transformers causal LM as the engine's target (see the module docstring)."""

    # SpecStep's CUDA graphs: not for this target. transformers' MoE experts pick the experts a batch hits on the host
    # (nonzero), and its forward keeps Python-side state; TorchEngine runs it eagerly (the device loop still works).
    graph_capturable = False

    def __init__(self, cfg: ckpt.TargetConfig, model: nn.Module):
        super().__init__()
        if cfg.backend != "transformers":
            raise ValueError(f"HfTarget runs transformers-backed targets; {cfg.family} is native (use TargetModel)")
        self.cfg = cfg
        self.hf = model.eval()
        self.tap_layer_ids: list[int] = []
        self.rotary = NoRotary()
        config = model.config
        self.softcap = getattr(config, "final_logit_softcapping", None)
        self.eager = config._attn_implementation == "eager"
        self.layer_types = list(cfg.layer_types)
        self.mask_dict = cfg.family in MASK_DICT_FAMILIES
        if not self.mask_dict and len(set(self.layer_types)) > 1:  # guarded in checkpoint; a loud check if not
            raise ValueError(f"{cfg.family}: mixed layer types need a model that takes masks by layer type")
        # hybrid targets: each linear-attention layer's module, its input recorded for the rollback (a pre-hook that
        # only acts when the layer runs against an HfKVCache inside HfTarget.forward)
        self.linear_layers = {i: layer.linear_attn for i, (layer, kind) in enumerate(zip(self.decoder.layers,
                                                                                          self.layer_types))
                              if kind == "linear_attention"}
        for module in self.linear_layers.values():
            module.register_forward_pre_hook(_record_linear_input, with_kwargs=True)
        # forward(tree=...) verifies draft trees (SpecStep reads this at construction: max_tree_nodes), except on hybrid
        # targets: a linear-attention layer's recurrent state runs the nodes as one sequence, not along their branches
        self.tree_verify = not self.linear_layers
        self.cache_kwarg = cache_keyword(self.decoder.forward, "past_key_values")

    # ---- loading ---------------------------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, dtype: torch.dtype | None = None,
                        device: str | torch.device = "cpu", cfg: ckpt.TargetConfig | None = None) -> "HfTarget":
        directory = Path(directory)
        cfg = cfg or ckpt.load_target_config(directory)
        dtype = dtype or cfg.dtype
        ckpt.safetensors_files(directory, "target")  # pickle-only / no weights / missing shards: refused here
        model_class = _model_class(cfg)
        kwargs = dict(config=cfg.hf_config, dtype=dtype, use_safetensors=True, local_files_only=True,
                      output_loading_info=True, attn_implementation=_attn_implementation(model_class),
                      ignore_mismatched_sizes=True)  # reported below by name, then refused
        if cfg.text_of_multimodal:
            kwargs["key_mapping"] = {r"^model\.language_model\.": "model."}
        if cfg.quantization == "mxfp4":
            from transformers import Mxfp4Config

            kwargs["quantization_config"] = Mxfp4Config(dequantize=True)
        try:
            with _quiet_transformers():
                model, info = model_class.from_pretrained(str(directory), **kwargs)
        except Exception as err:  # noqa: BLE001 - transformers raises many kinds; the message carries the cause
            detail = " ".join(str(err).split())[:500]
            raise CheckpointError(f"target {directory}: transformers could not load the weights ({type(err).__name__}: "
                                  f"{detail}); the weights and config.json disagree or the files are damaged") from None
        missing = set(info.get("missing_keys") or ())
        unexpected = {k for k in info.get("unexpected_keys") or ()
                      if not (cfg.text_of_multimodal and k.startswith(MULTIMODAL_TOWER_PREFIXES))}
        mismatched = info.get("mismatched_keys") or ()
        if missing:
            raise CheckpointError(f"target {directory}: missing tensor(s) {_shown(missing)}; the weights do not match "
                                  "config.json (wrong or truncated checkpoint?)")
        if unexpected:
            raise CheckpointError(
                f"target {directory}: unexpected tensor(s) {_shown(unexpected)} that config.json does not account for; "
                "the weights and config.json disagree (fix config.json, e.g. num_hidden_layers, or remove the extra "
                "tensors)")
        if mismatched or info.get("error_msgs"):
            names = [m[0] if isinstance(m, (tuple, list)) else str(m) for m in mismatched] or list(info["error_msgs"])
            raise CheckpointError(f"target {directory}: tensor(s) {_shown(names)} have shapes config.json does not "
                                  "imply; the weights and config.json disagree")
        bad = [name for name, t in list(model.named_parameters()) + list(model.named_buffers())
               if t.is_floating_point() and not bool(torch.isfinite(t).all())]
        if bad:
            raise CheckpointError(f"target {directory}: tensor(s) {_shown(bad)} have NaN/Inf values; the checkpoint is "
                                  "corrupt: re-export or re-copy it")
        return cls(cfg, model.to(device))

    def fuse(self) -> "HfTarget":
        """Nothing to fuse: transformers' modules run as they are."""
        return self

    # ---- what the engine and the drafter borrow --------------------------------------------------------------------

    @property
    def lm_head(self) -> nn.Module:
        return self.hf.lm_head

    @property
    def decoder(self) -> nn.Module:
        return self.hf.model

    def embed(self, token_ids: torch.Tensor) -> torch.Tensor:
        """The family's input embedding, scale included (Gemma: x sqrt(hidden)): z-lab's drafters embed their block
        with `target.model.embed_tokens(...)`, which is this module."""
        return self.decoder.embed_tokens(token_ids)

    def logits(self, normed_hidden: torch.Tensor) -> torch.Tensor:
        """The LM head as the family's *ForCausalLM applies it, final logit softcapping included (Gemma: cap *
        tanh(logits / cap); monotonic, so argmax drafts are the same with or without it)."""
        logits = self.hf.lm_head(normed_hidden)
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def kv_shapes(self) -> list[tuple[int, int] | None]:
        """(kv_heads, head_dim) of each layer's cache, None for layers that reuse another layer's K/V (Gemma 4) and for
        linear-attention layers (Qwen3.5)."""
        shapes: list[tuple[int, int] | None] = []
        for layer in self.decoder.layers:
            attn = getattr(layer, "self_attn", None)  # None: a linear-attention layer (no K/V; a state, LinearStates)
            if attn is None or getattr(attn, "is_kv_shared_layer", False):
                shapes.append(None)
            else:
                shapes.append((attn.k_proj.out_features // attn.head_dim, attn.head_dim))
        return shapes

    def cache_shapes(self) -> list[tuple[int, int, int]]:
        """(layers, kv_heads, head_dim) groups for TorchEngine's memory check."""
        return [(1, h, d) for s in self.kv_shapes() if s for h, d in [s]]

    def state_bytes_per_slot(self) -> int:
        """Per-slot memory besides the KV cache: the linear-attention layers' states (hybrid targets), else 0."""
        return LinearStates.bytes_per_slot(self.linear_layers, self.hf.lm_head.weight.dtype) if self.linear_layers else 0

    def new_cache(self, max_batch: int, capacity: int, device=None) -> HfKVCache:
        weight = self.hf.lm_head.weight
        device = device or weight.device
        linear = LinearStates(self.linear_layers, max_batch, weight.dtype, device) if self.linear_layers else None
        return HfKVCache(self.kv_shapes(), max_batch, capacity, weight.dtype, device, linear)

    # ---- forward ---------------------------------------------------------------------------------------------------

    def _masks(self, visible: torch.Tensor, query_pos: torch.Tensor, key_pos: torch.Tensor, dtype: torch.dtype):
        """4-D masks [N, 1, T, upto] per layer type, in the attention implementation's form; None for linear-attention
        layers (they take no mask: a row's right padding is rolled back out of its state, see LinearStates).
        visible [N, T, upto]: which keys each query may attend to (causal, or the tree mask); query_pos [N, T] and
        key_pos [N or 1, upto]: their positions in the sequence, which sliding layers measure the window in (keep a key
        when query_pos - key_pos < sliding_window: transformers' sliding_window_overlay)."""
        masks = {}
        for layer_type in dict.fromkeys(self.layer_types):
            if layer_type == "linear_attention":
                masks[layer_type] = None
                continue
            mask = visible
            if layer_type != "full_attention":
                mask = mask & (query_pos[:, :, None] - key_pos[:, None, :] < self.cfg.sliding_window)
            mask = mask[:, None]
            if self.eager:
                mask = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, torch.finfo(dtype).min)
            masks[layer_type] = mask
        return masks if self.mask_dict else masks[self.layer_types[0]]

    def forward(self, input_ids: torch.Tensor, cache: HfKVCache, slots: torch.Tensor, *,
                logits_at: torch.Tensor | None = None, tap: bool = False, max_length: int | None = None,
                host_slots: list[int] | None = None, tree: tuple[torch.Tensor, torch.Tensor] | None = None,
                fresh: bool = False):
        """TargetModel.forward's contract (but for `fresh`, unused: transformers attends with its own masks): T new
        tokens per row at positions cache.lengths[slots] + 0..T-1 (right padding allowed), lengths not advanced;
        returns (logits [N, K, V], features [N, T, taps * hidden] or None).
        Afterwards the caller may set each row's length to anything from its start to start + T (a hybrid target's
        linear-attention states follow at the row's next forward).
        tree (depth [N, T], ancestors [N, T, T] bool), as TargetModel.forward takes it: the T tokens are the nodes of a
        draft tree; node i is still written at cache position start + i, but its RoPE position (position_ids) is
        start + depth[i] and it attends to the cache before start and to its ancestors (key start + j where
        ancestors[:, i, j]). Sliding layers measure their window in sequence positions: p for a cache key p < start,
        start + depth[j] for node j, start + depth[i] for query i. Refused for hybrid targets (`tree_verify` False):
        their linear-attention states run the nodes as one sequence, which a tree's branches are not."""
        if tree is not None and not self.tree_verify:
            raise ValueError(f"{self.cfg.family}: a hybrid target (linear-attention layers) cannot verify draft trees: "
                             "its recurrent state cannot follow a tree's branches; use a chain draft")
        t = input_ids.shape[1]
        start = cache.lengths[slots]
        upto = max_length if max_length is not None else int(start.max()) + t
        pos = forward_positions(start, t, upto, tree)  # where the tokens are written, their RoPE positions, the mask
        masks = self._masks(pos.visible, pos.rope, pos.keys, self.hf.lm_head.weight.dtype)
        cache.begin(slots, pos.write, slot_view(slots, host_slots), upto, host_slots)
        completed = False
        try:
            out = self.decoder(input_ids=input_ids, attention_mask=masks, position_ids=pos.rope,
                               use_cache=True, output_hidden_states=bool(tap), **{self.cache_kwarg: cache})
            completed = True
        finally:
            cache.end(completed)
        features = torch.cat([out.hidden_states[i + 1] for i in self.tap_layer_ids], dim=-1) if tap else None
        h = out.last_hidden_state
        if logits_at is not None:
            h = torch.gather(h, 1, logits_at[..., None].expand(-1, -1, h.shape[-1]))
        return self.logits(h), features
