"""Checkpoints: read, validate and write target (Hugging Face) and drafter (z-lab DFlash) directories.

Everything here runs before any model is built, so a bad directory fails fast with one error that names the field
and the fix. Weights are safetensors only (never unpickled); configs are parsed by transformers' own config classes
(no remote code) so old- and new-style fields (`rope_scaling` vs `rope_parameters`, `torch_dtype` vs `dtype`) both work.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dflash_trt.errors import CheckpointError, ConfigError
from dflash_trt.tempdirs import make_tempdir, owned_name

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
DRAFTER_ARCHITECTURE = "DFlashDraftModel"

# architecture name -> family. Native families (NATIVE_FAMILIES) run on dflash-trt's own decoder (models/target.py: the
# family fixes the tensor layout and a few switches, q/k norms); the others run the family's own transformers module
# against the engine's KV cache (models/hf_target.py): attention sinks, sliding windows, MoE routing, per-layer types,
# RoPE variants and Gated DeltaNet layers are transformers' own. A *ForConditionalGeneration entry serves the text
# model of its text_config.
TARGET_ARCHITECTURES = {
    "Qwen3ForCausalLM": "qwen3", "LlamaForCausalLM": "llama",
    "GptOssForCausalLM": "gpt_oss", "Qwen3MoeForCausalLM": "qwen3_moe",
    "Gemma4ForCausalLM": "gemma4", "Gemma4ForConditionalGeneration": "gemma4",
    "Qwen3_5ForCausalLM": "qwen3_5", "Qwen3_5ForConditionalGeneration": "qwen3_5",
    "Qwen3_5MoeForCausalLM": "qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration": "qwen3_5_moe",
    "Qwen3NextForCausalLM": "qwen3_next",
}
NATIVE_FAMILIES = ("qwen3", "llama")
# family -> the model_type its (text) config must have
HF_FAMILY_MODEL_TYPES = {"gpt_oss": "gpt_oss", "qwen3_moe": "qwen3_moe", "gemma4": "gemma4_text",
                         "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text", "qwen3_next": "qwen3_next"}
# Layer types the transformers-backed path runs (it builds each attention type's mask; 'linear_attention' is a Gated
# DeltaNet layer whose conv / recurrent state models/linear_states.py keeps and rolls back per slot), and the families
# whose transformers module has each: a layer type is run only by a family whose module implements it.
HF_LAYER_TYPES = ("full_attention", "sliding_attention", "linear_attention")
HYBRID_FAMILIES = ("qwen3_5", "qwen3_5_moe", "qwen3_next")  # the families with 'linear_attention' layers
FAMILY_LAYER_TYPES = {"gpt_oss": ("full_attention", "sliding_attention"),
                      "qwen3_moe": ("full_attention", "sliding_attention"),
                      "gemma4": ("full_attention", "sliding_attention"),
                      **{family: ("full_attention", "linear_attention") for family in HYBRID_FAMILIES}}
# RoPE variants that are a fixed function of position. "dynamic"/"longrope" change with sequence length at run time.
STATIC_ROPE_TYPES = ("default", "linear", "llama3", "yarn")

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


# --------------------------------------------------------------------------------------------------------------------
# Config parsing
# --------------------------------------------------------------------------------------------------------------------


def read_config_json(directory: str | os.PathLike, what: str) -> dict[str, Any]:
    """The raw config.json of a checkpoint directory, or a CheckpointError saying what is wrong with it."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{what} directory {str(directory)!r} does not exist; pass the path of a checkpoint directory")
    path = directory / CONFIG_NAME
    if not path.is_file():
        raise CheckpointError(f"{what} directory {str(directory)!r} has no {CONFIG_NAME}; it must be a Hugging Face-style checkpoint directory")
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{what} {path}: not valid JSON ({err}); repair or re-export the config") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{what} {path}: expected a JSON object at top level")
    return raw


def _hf_config(raw: dict[str, Any], what: str, path: Path):
    """Build transformers' config object for `raw` (no remote code: only model types transformers ships)."""
    from transformers import AutoConfig

    model_type = raw.get("model_type")
    if not isinstance(model_type, str):
        raise CheckpointError(f"{what} {path}: field 'model_type' is missing; add e.g. \"model_type\": \"qwen3\"")
    fields = {k: v for k, v in raw.items() if k not in ("model_type", "transformers_version", "auto_map")}
    try:
        return AutoConfig.for_model(model_type, **fields)
    except Exception as err:  # noqa: BLE001 - transformers 5 validates with huggingface_hub's own error classes
        detail = " ".join(str(err).split())
        raise CheckpointError(f"{what} {path}: transformers rejects this config: {detail}; fix the named field") from None


def _require_int(raw: dict[str, Any], name: str, what: str, path: Path, minimum: int = 1) -> int:
    value = raw.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CheckpointError(f"{what} {path}: field '{name}' must be an integer >= {minimum}, got {value!r}")
    return value


def rope_parameters(hf_config) -> dict[str, Any]:
    """RoPE parameters in transformers-5 form ({rope_type, rope_theta, ...}) from a config of either generation."""
    params = getattr(hf_config, "rope_parameters", None)
    if params:  # transformers >= 5 standardizes old `rope_scaling` + `rope_theta` into this
        return dict(params)
    params = dict(getattr(hf_config, "rope_scaling", None) or {})
    params["rope_type"] = params.get("rope_type", params.get("type", "default"))
    params["rope_theta"] = getattr(hf_config, "rope_theta", 10000.0)
    return params


def _checkpoint_dtype(raw: dict[str, Any], what: str, path: Path) -> torch.dtype:
    name = str(raw.get("dtype") or raw.get("torch_dtype") or "float32").replace("torch.", "")
    if name not in DTYPES:
        raise CheckpointError(f"{what} {path}: field 'dtype' = {name!r} is not supported; use one of {sorted(DTYPES)}")
    return DTYPES[name]


@dataclass
class DecoderShape:
    """What the target and the drafter decoders have in common."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    vocab_size: int
    attention_bias: bool
    rope: dict[str, Any]
    dtype: torch.dtype
    hf_config: Any = field(repr=False, compare=False)


def _decoder_shape(raw: dict[str, Any], hf, what: str, path: Path, sliding_ok: bool = False) -> dict[str, Any]:
    """sliding_ok: the caller validates and runs sliding-window layers itself (the drafter); otherwise refused."""
    for name in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
        _require_int(raw, name, what, path)
    heads = raw["num_attention_heads"]
    kv_heads = raw.get("num_key_value_heads") or heads
    if heads % kv_heads:
        raise CheckpointError(f"{what} {path}: num_attention_heads={heads} is not a multiple of num_key_value_heads={kv_heads}")
    head_dim = raw.get("head_dim") or raw["hidden_size"] // heads
    rope = rope_parameters(hf)
    if rope.get("rope_type", "default") not in STATIC_ROPE_TYPES:
        raise CheckpointError(
            f"{what} {path}: rope type {rope.get('rope_type')!r} is not supported (supported: {', '.join(STATIC_ROPE_TYPES)})"
        )
    layer_types = raw.get("layer_types") or ["full_attention"] * raw["num_hidden_layers"]
    if not sliding_ok and (raw.get("use_sliding_window") or any(t != "full_attention" for t in layer_types)):
        raise CheckpointError(
            f"{what} {path}: field 'layer_types' has sliding-window layers {sorted(set(layer_types))}; dflash-trt supports "
            "full-attention layers only: set use_sliding_window=false and layer_types to all \"full_attention\""
        )
    return dict(
        hidden_size=raw["hidden_size"],
        intermediate_size=raw["intermediate_size"],
        num_hidden_layers=raw["num_hidden_layers"],
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        vocab_size=raw["vocab_size"],
        attention_bias=bool(raw.get("attention_bias", False)),
        rope=rope,
        dtype=_checkpoint_dtype(raw, what, path),
        hf_config=hf,
    )


@dataclass
class TargetConfig(DecoderShape):
    family: str = "qwen3"
    mlp_bias: bool = False
    tie_word_embeddings: bool = False
    eos_token_ids: tuple[int, ...] = ()
    max_position_embeddings: int | None = None  # the longest sequence the target was made for (None: not stated)
    # "native": dflash-trt's decoder (models/target.py); "transformers": the family's transformers module
    # (models/hf_target.py). The fields below are the transformers path's; hf_config is then the *text* config.
    backend: str = "native"
    architecture: str = ""
    text_of_multimodal: bool = False  # a *ForConditionalGeneration checkpoint: its weights under model.language_model.
    layer_types: tuple[str, ...] = ()
    sliding_window: int | None = None
    quantization: str | None = None  # "mxfp4": gpt-oss expert weights, dequantized at load (see hf_target)

    @property
    def qk_norm(self) -> bool:
        return self.family == "qwen3"


def _eos_ids(directory: Path, *configs: dict[str, Any]) -> tuple[int, ...]:
    """EOS ids from config.json (top level, then a text_config) and generation_config.json, in that order."""
    eos_ids: list[int] = []
    for raw in configs:
        eos = raw.get("eos_token_id")
        eos_ids += [eos] if isinstance(eos, int) else list(eos or [])
    generation_config = directory / "generation_config.json"
    if generation_config.is_file():
        try:
            gen_eos = json.loads(generation_config.read_text()).get("eos_token_id")
        except json.JSONDecodeError:
            gen_eos = None
        eos_ids += [gen_eos] if isinstance(gen_eos, int) else list(gen_eos or [])
    return tuple(dict.fromkeys(int(e) for e in eos_ids))


def load_target_config(directory: str | os.PathLike) -> TargetConfig:
    directory = Path(directory)
    raw = read_config_json(directory, "target")
    path = directory / CONFIG_NAME
    archs = raw.get("architectures") or []
    family = next((TARGET_ARCHITECTURES[a] for a in archs if a in TARGET_ARCHITECTURES), None)
    if family is None:
        raise CheckpointError(
            f"target {path}: field 'architectures' = {archs!r} is not supported; supported: {sorted(TARGET_ARCHITECTURES)}"
        )
    if family not in NATIVE_FAMILIES:
        arch = next(a for a in archs if a in TARGET_ARCHITECTURES)
        return _hf_target_config(directory, raw, path, family, arch)
    hf = _hf_config(raw, "target", path)
    return TargetConfig(
        **_decoder_shape(raw, hf, "target", path),
        family=family,
        mlp_bias=bool(raw.get("mlp_bias", False)),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        eos_token_ids=_eos_ids(directory, raw),
        max_position_embeddings=_require_int(raw, "max_position_embeddings", "target", path)
        if "max_position_embeddings" in raw else None,
        architecture=next(a for a in archs if a in TARGET_ARCHITECTURES),
    )


def _hf_target_config(directory: Path, raw: dict[str, Any], path: Path, family: str, arch: str) -> TargetConfig:
    """A target the transformers-backed path runs (TARGET_ARCHITECTURES, not native): transformers parses the config
    (no remote code); what the engine needs is read from its text config; what it cannot run is refused here, before
    any weights are read, with the field and the reason."""
    what = "target"
    multimodal = arch.endswith("ForConditionalGeneration")
    if multimodal and not isinstance(raw.get("text_config"), dict):
        raise CheckpointError(f"{what} {path}: architecture {arch!r} needs a 'text_config' object (dflash-trt serves "
                              "its text model); this config has none")
    raw_text = raw["text_config"] if multimodal else raw
    hf = _hf_config(raw, what, path)
    text = hf.get_text_config() if multimodal else hf
    if multimodal:  # the multimodal class ties its LM head by its own (top-level) flag: the text model loads the same
        text.tie_word_embeddings = bool(getattr(hf, "tie_word_embeddings", False))
    model_type = _text_attr(text, "model_type", None)
    if model_type != HF_FAMILY_MODEL_TYPES[family]:
        raise CheckpointError(f"{what} {path}: architecture {arch!r} needs a (text) config of model_type "
                              f"{HF_FAMILY_MODEL_TYPES[family]!r}, got {model_type!r}; fix 'model_type' or 'architectures'")
    for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
        _require_int(raw_text, name, what, path)
    layers = raw_text["num_hidden_layers"]
    sliding = _text_attr(text, "sliding_window", None)
    layer_types = list(_text_attr(text, "layer_types", None) or
                       ["sliding_attention" if sliding else "full_attention"] * layers)
    if len(layer_types) != layers:
        raise CheckpointError(f"{what} {path}: field 'layer_types' has {len(layer_types)} entries for "
                              f"num_hidden_layers={layers}; give one per layer")
    allowed = FAMILY_LAYER_TYPES[family]
    unknown = sorted(set(layer_types) - set(allowed))
    if unknown:
        if set(unknown) <= set(HF_LAYER_TYPES):  # a type dflash-trt runs, but not in this family's module
            why = (f"{family}'s transformers module has {' and '.join(allowed)} layers only"
                   + ("; 'linear_attention' (Gated DeltaNet) layers run in the hybrid families' modules "
                      f"({', '.join(a for a, f in TARGET_ARCHITECTURES.items() if f in HYBRID_FAMILIES)})"
                      if "linear_attention" in unknown else ""))
        else:
            why = (f"dflash-trt runs {', '.join(HF_LAYER_TYPES)} layers (it builds each attention type's mask and "
                   "keeps each linear-attention layer's state); a layer type it does not know cannot be served")
        raise CheckpointError(f"{what} {path}: field 'layer_types' has layer type(s) {unknown}, not supported: {why}")
    if "sliding_attention" in layer_types and not (isinstance(sliding, int) and sliding >= 1):
        raise CheckpointError(f"{what} {path}: sliding_attention layers need 'sliding_window' >= 1, got {sliding!r}")
    if _text_attr(text, "use_bidirectional_attention", None) == "all":
        raise CheckpointError(f"{what} {path}: field 'use_bidirectional_attention' = 'all' makes every layer "
                              "bidirectional: not a causal language model, speculative decoding cannot run on it")
    quant = raw.get("quantization_config") or raw_text.get("quantization_config")
    quantization = None
    if quant:
        method = quant.get("quant_method") if isinstance(quant, dict) else None
        if family == "gpt_oss" and method == "mxfp4":
            quantization = "mxfp4"
        else:
            raise CheckpointError(f"{what} {path}: field 'quantization_config' (quant_method {method!r}) is not "
                                  "supported for this target; dflash-trt loads float checkpoints and gpt-oss MXFP4 "
                                  "experts (dequantized)")
    heads = raw_text["num_attention_heads"]
    kv_heads = _text_attr(text, "num_key_value_heads", None) or heads
    if heads % kv_heads:
        raise CheckpointError(f"{what} {path}: num_attention_heads={heads} is not a multiple of num_key_value_heads={kv_heads}")
    max_pos = _text_attr(text, "max_position_embeddings", None)
    dtype_src = raw if ("dtype" in raw or "torch_dtype" in raw) else raw_text
    if quantization == "mxfp4" and not ("dtype" in dtype_src or "torch_dtype" in dtype_src):
        dtype_src = {"dtype": "bfloat16"}  # gpt-oss stores its other tensors in bf16; its experts dequantize to it
    return TargetConfig(
        hidden_size=raw_text["hidden_size"],
        intermediate_size=int(_text_attr(text, "intermediate_size", None) or 4 * raw_text["hidden_size"]),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=_text_attr(text, "head_dim", None) or raw_text["hidden_size"] // heads,
        rms_norm_eps=float(_text_attr(text, "rms_norm_eps", 1e-6)),
        vocab_size=raw_text["vocab_size"],
        attention_bias=bool(_text_attr(text, "attention_bias", False)),
        rope=_drafter_rope(text),
        dtype=_checkpoint_dtype(dtype_src, what, path),
        hf_config=text,
        family=family,
        tie_word_embeddings=bool(getattr(hf, "tie_word_embeddings", False) if multimodal
                                 else _text_attr(text, "tie_word_embeddings", False)),
        eos_token_ids=_eos_ids(directory, raw, raw_text) if multimodal else _eos_ids(directory, raw),
        max_position_embeddings=int(max_pos) if max_pos else None,
        backend="transformers",
        architecture=arch,
        text_of_multimodal=multimodal,
        layer_types=tuple(layer_types),
        sliding_window=sliding if "sliding_attention" in layer_types else None,
        quantization=quantization,
    )


def _text_attr(text_config, name: str, default=None):
    """A text-config field; for a field that varies per layer (Gemma 4's head_dim / num_key_value_heads, which
    transformers refuses to read globally) the config's own global value (the sliding layers')."""
    try:
        return getattr(text_config, name, default)
    except Exception:  # noqa: BLE001 - transformers' AmbiguousGlobalPerLayerAttributeError
        return text_config.to_dict().get(name, default)


def _drafter_rope(text_config) -> dict[str, Any]:
    """The RoPE a new drafter for a transformers-path target copies (new_drafter_config; the target itself runs
    transformers' own RoPE): the full-attention layers' parameters where they differ per layer type (Gemma 4), and
    plain RoPE at their theta where their type is not one dflash-trt's drafter implements (e.g. Gemma 4's
    'proportional')."""
    params = rope_parameters(text_config)
    if "full_attention" in params and isinstance(params["full_attention"], dict):
        params = dict(params["full_attention"])
    if params.get("rope_type", "default") not in STATIC_ROPE_TYPES:
        params = {"rope_type": "default", "rope_theta": float(params.get("rope_theta", 10000.0))}
    # what only the target's own attention has (Qwen3.5: RoPE on a quarter of head_dim, multimodal sections): a
    # drafter rotates its whole head at the target's theta and scaling
    for name in ("partial_rotary_factor", "mrope_section", "mrope_interleaved"):
        params.pop(name, None)
    return params


@dataclass
class TargetSummary:
    """What the drafter pairing needs from any target config.json, for targets only TensorRT-LLM runs (e.g. gpt-oss:
    MoE, sliding-window attention). `check_pair` accepts it like a TargetConfig."""

    model_type: str
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int


def load_target_summary(directory: str | os.PathLike) -> TargetSummary:
    directory = Path(directory)
    raw = read_config_json(directory, "target")
    path = directory / CONFIG_NAME
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw  # multimodal wrappers
    return TargetSummary(
        model_type=str(raw.get("model_type", "")),
        **{name: _require_int(text, name, "target", path) for name in ("hidden_size", "num_hidden_layers", "vocab_size")},
    )


def default_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """z-lab's default taps: evenly spaced from layer 1 to L-3, rounded; one tap sits in the middle."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    span = end - start
    return [int(round(start + i * span / (num_draft_layers - 1))) for i in range(num_draft_layers)]


@dataclass
class DrafterConfig(DecoderShape):
    num_target_layers: int = 0
    block_size: int = 16
    mask_token_id: int = 0
    target_layer_ids: list[int] = field(default_factory=list)
    quantization: str = "none"  # none | fp8 | nvfp4 (ModelOpt unified HF export: hf_quant_config.json)
    quant_exclude_modules: list[str] = field(default_factory=list)
    # per drafter layer: "full_attention" or "sliding_attention" (() = all full); sliding layers see only keys whose
    # position is within sliding_window - 1 of the query's, either side (see models/drafter.py for the exact rule)
    layer_types: tuple[str, ...] = ()
    sliding_window: int | None = None
    # z-lab's rule: is_causal absent -> sliding layers causal inside the block, full layers not; given -> every layer
    is_causal: bool | None = None
    # DFlash2 (architectures ["DFlash2DraftModel"]; models/dflash2.py): conv_kernel_size > 0 marks one. Grouped dynamic
    # depthwise convolutions of conv_kernel_size taps (groups of conv_group_size channels) around every attention and
    # MLP sublayer, and a rank-selector_rank candidate selector over the target head's top selector_top_k per slot.
    conv_kernel_size: int = 0
    conv_group_size: int = 0
    selector_rank: int = 0
    selector_top_k: int = 0
    input_embedding_scale: float = 1.0  # the block's embeddings are scaled by this
    output_multiplier: float = 1.0  # the selector's unary (top-k head) logits are scaled by this ...
    final_logit_softcapping: float | None = None  # ... then soft-capped: tanh(x / cap) * cap

    @property
    def dflash2(self) -> bool:
        return self.conv_kernel_size > 0

    def layer_type(self, i: int) -> str:
        return self.layer_types[i] if self.layer_types else "full_attention"

    def layer_causal(self, i: int) -> bool:
        """Whether block queries of layer i see only block keys at or before their own position."""
        return self.layer_type(i) == "sliding_attention" if self.is_causal is None else self.is_causal


def _dflash_field(raw: dict[str, Any], name: str):
    """z-lab keeps DFlash fields under `dflash_config`; some exports put them top-level. Accept both."""
    nested = raw.get("dflash_config") or {}
    return nested.get(name, raw.get(name))


DRAFTER_LAYER_TYPES = ("full_attention", "sliding_attention")
DFLASH2_ARCHITECTURE = "DFlash2DraftModel"


def _positive_int(raw: dict[str, Any], name: str, path: Path) -> int:
    value = _dflash_field(raw, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CheckpointError(f"drafter {path}: field 'dflash_config.{name}' must be an integer >= 1 for a "
                              f"{DFLASH2_ARCHITECTURE} drafter, got {value!r}")
    return value


def _dflash2_fields(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """The DFlash2 fields of a drafter config (vLLM qwen3_dflash2.py reads them from `dflash_config`: conv_kernel_size,
    conv_group_size, selector_rank, selector_top_k required; input_embedding_scale, output_multiplier (default 1.0)
    and final_logit_softcapping (absent, null or <= 0: none) optional). One CheckpointError naming the field."""
    fields = {name: _positive_int(raw, name, path)
              for name in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")}
    hidden, vocab = raw.get("hidden_size"), raw.get("vocab_size")
    if isinstance(hidden, int) and hidden % fields["conv_group_size"]:
        raise CheckpointError(f"drafter {path}: field 'dflash_config.conv_group_size' = {fields['conv_group_size']} "
                              f"must divide hidden_size = {hidden}")
    if isinstance(vocab, int) and fields["selector_top_k"] > vocab:
        raise CheckpointError(f"drafter {path}: field 'dflash_config.selector_top_k' = {fields['selector_top_k']} "
                              f"exceeds vocab_size = {vocab}")
    for name in ("input_embedding_scale", "output_multiplier"):
        value = _dflash_field(raw, name)
        value = 1.0 if value is None else value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise CheckpointError(f"drafter {path}: field 'dflash_config.{name}' must be a finite number, got {value!r}")
        fields[name] = float(value)
    cap = _dflash_field(raw, "final_logit_softcapping")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or not math.isfinite(cap)):
        raise CheckpointError(f"drafter {path}: field 'dflash_config.final_logit_softcapping' must be a finite number "
                              f"or null, got {cap!r}")
    fields["final_logit_softcapping"] = float(cap) if cap is not None and cap > 0 else None
    return fields


def _drafter_layer_types(raw: dict[str, Any], hf, path: Path) -> tuple[tuple[str, ...], int | None]:
    """(layer_types, sliding_window) of a drafter config, as transformers' Qwen3Config (which z-lab's reference reads)
    resolves them: `layer_types` if given, else derived from use_sliding_window / max_window_layers; the window is
    `sliding_window` only when use_sliding_window is true. One CheckpointError naming the field otherwise."""
    layers = raw["num_hidden_layers"]
    given = raw.get("layer_types")
    if given is not None:
        if not isinstance(given, list) or len(given) != layers:
            raise CheckpointError(f"drafter {path}: field 'layer_types' must be a list of {layers} entries (one per "
                                  f"num_hidden_layers), got {given!r}")
        bad = sorted({repr(t) for t in given if t not in DRAFTER_LAYER_TYPES})
        if bad:
            raise CheckpointError(f"drafter {path}: field 'layer_types' has unsupported layer types {', '.join(bad)}; "
                                  f"a DFlash drafter's layers are {' or '.join(DRAFTER_LAYER_TYPES)}")
    window = raw.get("sliding_window")
    sliding = "sliding_attention" in (given or []) or (given is None and raw.get("use_sliding_window"))
    if sliding and window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise CheckpointError(f"drafter {path}: field 'sliding_window' must be an integer >= 1 for sliding_attention "
                              f"layers, got {window!r}")
    if hf is None:  # the pre-check before transformers parses the config
        return (), None
    types = tuple(getattr(hf, "layer_types", None) or given or ["full_attention"] * layers)
    if len(types) != layers or any(t not in DRAFTER_LAYER_TYPES for t in types):
        raise CheckpointError(f"drafter {path}: field 'layer_types' resolves to {list(types)!r}; need {layers} entries "
                              f"of {' or '.join(DRAFTER_LAYER_TYPES)}")
    if "sliding_attention" not in types:
        return types, None
    effective = getattr(hf, "sliding_window", None)
    if not raw.get("use_sliding_window") or effective is None:
        # transformers then sets sliding_window = None and z-lab's reference applies no window at all: ambiguous
        raise CheckpointError(
            f"drafter {path}: field 'layer_types' has sliding_attention layers but 'use_sliding_window' = "
            f"{raw.get('use_sliding_window')!r} / 'sliding_window' = {window!r}, so no window would apply; set "
            "use_sliding_window=true and sliding_window to the window the drafter was trained with")
    if isinstance(effective, bool) or not isinstance(effective, int) or effective < 1:
        raise CheckpointError(f"drafter {path}: field 'sliding_window' must be an integer >= 1, got {effective!r}")
    return types, effective


def load_drafter_config(directory: str | os.PathLike) -> DrafterConfig:
    directory = Path(directory)
    raw = read_config_json(directory, "drafter")
    path = directory / CONFIG_NAME
    archs = raw.get("architectures") or []
    if DRAFTER_ARCHITECTURE not in archs and DFLASH2_ARCHITECTURE not in archs:
        raise CheckpointError(
            f"drafter {path}: field 'architectures' = {archs!r}; a DFlash drafter must declare [\"{DRAFTER_ARCHITECTURE}\"] "
            f"(or [\"{DFLASH2_ARCHITECTURE}\"])"
        )
    dflash2 = _dflash2_fields(raw, path) if DFLASH2_ARCHITECTURE in archs else {}
    is_causal = raw.get("is_causal")
    if is_causal is not None and not isinstance(is_causal, bool):
        raise CheckpointError(f"drafter {path}: field 'is_causal' must be true, false or absent, got {is_causal!r}")
    _require_int(raw, "num_hidden_layers", "drafter", path)
    _drafter_layer_types(raw, None, path)  # a bad layer_types / sliding_window is named before transformers sees it
    hf = _hf_config(raw, "drafter", path)
    layer_types, sliding_window = _drafter_layer_types(raw, hf, path)
    num_target_layers = _require_int(raw, "num_target_layers", "drafter", path)
    block_size = raw.get("block_size", _dflash_field(raw, "block_size"))
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 2:
        raise CheckpointError(f"drafter {path}: field 'block_size' must be an integer >= 2, got {block_size!r}")
    mask_token_id = _dflash_field(raw, "mask_token_id")
    if isinstance(mask_token_id, bool) or not isinstance(mask_token_id, int) or mask_token_id < 0:
        raise CheckpointError(
            f"drafter {path}: field 'dflash_config.mask_token_id' must be a non-negative token id, got {mask_token_id!r}"
        )
    layer_ids = _dflash_field(raw, "target_layer_ids")
    if layer_ids is None:
        layer_ids = default_target_layer_ids(num_target_layers, raw.get("num_hidden_layers", 1))
    if not isinstance(layer_ids, list) or not layer_ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in layer_ids):
        raise CheckpointError(f"drafter {path}: field 'dflash_config.target_layer_ids' must be a non-empty list of ints, got {layer_ids!r}")
    quantization, exclude = _drafter_quantization(directory, raw)
    return DrafterConfig(
        **_decoder_shape(raw, hf, "drafter", path, sliding_ok=True),
        num_target_layers=num_target_layers,
        block_size=block_size,
        mask_token_id=mask_token_id,
        target_layer_ids=list(layer_ids),
        quantization=quantization,
        quant_exclude_modules=exclude,
        layer_types=layer_types,
        sliding_window=sliding_window,
        is_causal=is_causal,
        **dflash2,
    )


QUANT_CONFIG_NAME = "hf_quant_config.json"
QUANT_ALGOS = {"FP8": "fp8", "NVFP4": "nvfp4"}


def _drafter_quantization(directory: Path, raw: dict[str, Any]) -> tuple[str, list[str]]:
    """ModelOpt's unified HF export: `hf_quant_config.json` {quantization: {quant_algo, exclude_modules}} (and the
    same facts as `quantization_config` in config.json). Returns ("none", []) for an unquantized drafter."""
    qfile = directory / QUANT_CONFIG_NAME
    if qfile.is_file():
        try:
            quant = json.loads(qfile.read_text())["quantization"]
            algo, exclude = quant.get("quant_algo"), quant.get("exclude_modules") or []
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
            raise CheckpointError(f"drafter {qfile}: not a ModelOpt quantization config ({err}); re-export the drafter") from None
    else:
        quant = raw.get("quantization_config")
        if not quant:
            return "none", []
        if not isinstance(quant, dict):
            raise CheckpointError(f"drafter {directory / CONFIG_NAME}: field 'quantization_config' must be an object")
        algo, exclude = quant.get("quant_algo"), quant.get("ignore") or []
    if algo is None:
        return "none", []
    if algo not in QUANT_ALGOS:
        raise CheckpointError(
            f"drafter {qfile if qfile.is_file() else directory / CONFIG_NAME}: quant_algo {algo!r} is not supported; "
            f"dflash-trt runs {sorted(QUANT_ALGOS)} drafters (quantize with `dflash-trt build`)"
        )
    if not isinstance(exclude, list) or not all(isinstance(m, str) for m in exclude):
        raise CheckpointError(f"drafter {qfile}: field 'quantization.exclude_modules' must be a list of module names")
    return QUANT_ALGOS[algo], list(exclude)


def drafter_config_dict(cfg: DrafterConfig) -> dict[str, Any]:
    """The z-lab config.json for `cfg`: Qwen3 fields plus the DFlash fields (both RoPE spellings, so transformers
    4.x and 5.x readers agree)."""
    rope = dict(cfg.rope)
    scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
    dtype = str(cfg.dtype).replace("torch.", "")
    return {
        "architectures": [DFLASH2_ARCHITECTURE if cfg.dflash2 else DRAFTER_ARCHITECTURE],
        "model_type": "qwen3",
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": cfg.rms_norm_eps,
        "vocab_size": cfg.vocab_size,
        "attention_bias": cfg.attention_bias,
        "attention_dropout": 0.0,
        "max_position_embeddings": int(getattr(cfg.hf_config, "max_position_embeddings", 40960)),
        "tie_word_embeddings": False,
        "rope_theta": rope.get("rope_theta", 10000.0),
        "rope_scaling": None if scaling.get("rope_type", "default") == "default" else scaling,
        "rope_parameters": rope,
        "use_sliding_window": cfg.sliding_window is not None,
        "sliding_window": cfg.sliding_window,
        "layer_types": [cfg.layer_type(i) for i in range(cfg.num_hidden_layers)],
        **({"is_causal": cfg.is_causal} if cfg.is_causal is not None else {}),
        "dtype": dtype,
        "torch_dtype": dtype,
        "num_target_layers": cfg.num_target_layers,
        "block_size": cfg.block_size,
        "dflash_config": {"mask_token_id": cfg.mask_token_id, "target_layer_ids": list(cfg.target_layer_ids),
                          **({"conv_kernel_size": cfg.conv_kernel_size, "conv_group_size": cfg.conv_group_size,
                              "selector_rank": cfg.selector_rank, "selector_top_k": cfg.selector_top_k,
                              "input_embedding_scale": cfg.input_embedding_scale,
                              "output_multiplier": cfg.output_multiplier,
                              "final_logit_softcapping": cfg.final_logit_softcapping} if cfg.dflash2 else {})},
    }


# --------------------------------------------------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------------------------------------------------


def safetensors_files(directory: str | os.PathLike, what: str) -> list[Path]:
    """The safetensors files of a checkpoint directory (one `model.safetensors`, a sharded index's shards, or every
    *.safetensors), or a CheckpointError: no weights, missing shards, or pickle weights only (never unpickled)."""
    directory = Path(directory)
    index = directory / INDEX_NAME
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise CheckpointError(f"{what} {index}: not a valid safetensors index ({err}); re-export the checkpoint") from None
        if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
            raise CheckpointError(f"{what} {index}: field 'weight_map' must map tensor names to shard file names; re-export the checkpoint")
        files = [directory / name for name in sorted(set(weight_map.values()))]
        for f in files:
            if not f.is_file():
                raise CheckpointError(f"{what} {index}: names shard {f.name!r}, which is missing from {directory}; copy all shards")
    else:
        files = sorted(directory.glob("*.safetensors"))
    if not files:
        pickles = sorted(p.name for ext in ("*.bin", "*.pt", "*.pth", "*.ckpt") for p in directory.glob(ext))
        if pickles:
            raise CheckpointError(
                f"{what} {directory}: holds only pickle weights {pickles}; dflash-trt loads safetensors only "
                "(never unpickles): convert them with safetensors.torch.save_file on a trusted machine"
            )
        raise CheckpointError(f"{what} {directory}: no *.safetensors weights found")
    return files


def load_safetensors_dir(directory: str | os.PathLike, what: str, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint directory: one `model.safetensors`, a sharded index, or a set of *.safetensors."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory)
    files = safetensors_files(directory, what)
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        try:
            shard = load_file(str(f), device=str(device))
        except (SafetensorError, OSError, ValueError, RuntimeError) as err:
            raise CheckpointError(f"{what} {f}: not a readable safetensors file ({err}); re-export or re-copy it") from None
        for name in shard:
            if name in tensors:
                raise CheckpointError(f"{what} {directory}: tensor {name!r} appears in more than one shard")
        tensors.update(shard)
    return tensors


def check_tensors(tensors: dict[str, torch.Tensor], expected: dict[str, tuple[int, ...]], what: str, directory,
                  allowed: set[str] = frozenset()) -> None:
    """Missing, unexpected, mis-shaped or non-finite tensors: one error naming the tensor. `allowed` names tensors the
    checkpoint may hold besides `expected` (checked by the caller); any other name means the weights are not the
    model config.json describes (a target whose weights hold more layers than its config says would otherwise run
    as a different model)."""
    missing = [name for name in expected if name not in tensors]
    if missing:
        shown = ", ".join(missing[:5]) + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else "")
        raise CheckpointError(
            f"{what} {directory}: missing tensor(s) {shown}; the weights do not match config.json (wrong or truncated checkpoint?)"
        )
    for name, shape in expected.items():
        if tensors[name].dtype not in DTYPES.values():  # float8 counts as floating point: it needs its scales
            raise CheckpointError(
                f"{what} {directory}: tensor {name!r} has dtype {str(tensors[name].dtype).replace('torch.', '')}; "
                "expected float32/bfloat16/float16 weights (quantized checkpoints are produced by `dflash-trt build`, not loaded here)"
            )
        found = tuple(tensors[name].shape)
        if found != tuple(shape):
            raise CheckpointError(
                f"{what} {directory}: tensor {name!r} has shape {list(found)}, config.json implies {list(shape)}; "
                "the weights and config.json disagree"
            )
    unexpected = sorted(name for name in tensors if name not in expected and name not in allowed)
    if unexpected:
        shown = ", ".join(unexpected[:5]) + (f" (+{len(unexpected) - 5} more)" if len(unexpected) > 5 else "")
        raise CheckpointError(
            f"{what} {directory}: unexpected tensor(s) {shown} that config.json does not account for; the weights and "
            "config.json disagree (fix config.json, e.g. num_hidden_layers, or remove the extra tensors)"
        )
    check_finite(tensors, what, directory)


def check_finite(tensors: dict[str, torch.Tensor], what: str, directory) -> None:
    """NaN or Inf in any floating-point tensor (float8 included) is a corrupt checkpoint: caught at load, not as an
    empty output later. One pass over the weights (a few seconds for an 8B model on CPU)."""
    for name, t in tensors.items():
        if not t.is_floating_point():
            continue
        bad = t if t.dtype in DTYPES.values() else t.float()  # float8: no isfinite kernel
        if not bool(torch.isfinite(bad).all()):
            count = int((~torch.isfinite(bad)).sum())
            raise CheckpointError(f"{what} {directory}: tensor {name!r} has {count} NaN/Inf value(s); the checkpoint "
                                  "is corrupt: re-export or re-copy it")


def _attention_shapes(prefix: str, cfg: DecoderShape, qk_norm: bool) -> dict[str, tuple[int, ...]]:
    h, d = cfg.hidden_size, cfg.head_dim
    q, kv = cfg.num_attention_heads * d, cfg.num_key_value_heads * d
    shapes = {
        f"{prefix}self_attn.q_proj.weight": (q, h),
        f"{prefix}self_attn.k_proj.weight": (kv, h),
        f"{prefix}self_attn.v_proj.weight": (kv, h),
        f"{prefix}self_attn.o_proj.weight": (h, q),
        f"{prefix}input_layernorm.weight": (h,),
        f"{prefix}post_attention_layernorm.weight": (h,),
    }
    if cfg.attention_bias:
        shapes.update({f"{prefix}self_attn.q_proj.bias": (q,), f"{prefix}self_attn.k_proj.bias": (kv,),
                       f"{prefix}self_attn.v_proj.bias": (kv,), f"{prefix}self_attn.o_proj.bias": (h,)})
    if qk_norm:
        shapes.update({f"{prefix}self_attn.q_norm.weight": (d,), f"{prefix}self_attn.k_norm.weight": (d,)})
    return shapes


def _mlp_shapes(prefix: str, cfg: DecoderShape, bias: bool) -> dict[str, tuple[int, ...]]:
    h, i = cfg.hidden_size, cfg.intermediate_size
    shapes = {f"{prefix}mlp.gate_proj.weight": (i, h), f"{prefix}mlp.up_proj.weight": (i, h), f"{prefix}mlp.down_proj.weight": (h, i)}
    if bias:
        shapes.update({f"{prefix}mlp.gate_proj.bias": (i,), f"{prefix}mlp.up_proj.bias": (i,), f"{prefix}mlp.down_proj.bias": (h,)})
    return shapes


def target_tensor_shapes(cfg: TargetConfig) -> dict[str, tuple[int, ...]]:
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, cfg.hidden_size), "model.norm.weight": (cfg.hidden_size,)}
    for i in range(cfg.num_hidden_layers):
        shapes.update(_attention_shapes(f"model.layers.{i}.", cfg, cfg.qk_norm))
        shapes.update(_mlp_shapes(f"model.layers.{i}.", cfg, cfg.mlp_bias))
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, cfg.hidden_size)
    return shapes


def drafter_tensor_shapes(cfg: DrafterConfig) -> dict[str, tuple[int, ...]]:
    h = cfg.hidden_size
    shapes = {"fc.weight": (h, len(cfg.target_layer_ids) * h), "hidden_norm.weight": (h,), "norm.weight": (h,)}
    for i in range(cfg.num_hidden_layers):
        shapes.update(_attention_shapes(f"layers.{i}.", cfg, qk_norm=True))
        shapes.update(_mlp_shapes(f"layers.{i}.", cfg, bias=False))
        if cfg.dflash2:  # vLLM qwen3_dflash2.py DFlashGroupedConv: base_kernel [2, taps, H], kernel_projection
            groups = h // cfg.conv_group_size
            for conv in ("attention_conv", "mlp_conv"):
                shapes[f"layers.{i}.{conv}.base_kernel"] = (2, cfg.conv_kernel_size, h)
                shapes[f"layers.{i}.{conv}.kernel_projection.weight"] = (2 * cfg.conv_kernel_size * groups, h)
    if cfg.dflash2:  # CandidateSelector: two [V, r] codebooks and hidden_projection [r, H]
        shapes["candidate_selector.predecessor_codebook"] = (cfg.vocab_size, cfg.selector_rank)
        shapes["candidate_selector.successor_codebook"] = (cfg.vocab_size, cfg.selector_rank)
        shapes["candidate_selector.hidden_projection.weight"] = (cfg.selector_rank, h)
    return shapes


def load_target_tensors(directory, cfg: TargetConfig, device="cpu") -> dict[str, torch.Tensor]:
    tensors = load_safetensors_dir(directory, "target", device)
    # What transformers also ignores: a tied head saved anyway, and the RoPE tables old Llama exports carried.
    allowed = {name for name in tensors if name.endswith(".rotary_emb.inv_freq")}
    if cfg.tie_word_embeddings:
        allowed.add("lm_head.weight")
    check_tensors(tensors, target_tensor_shapes(cfg), "target", directory, allowed)
    return tensors


def load_drafter_tensors(directory, cfg: DrafterConfig, device="cpu") -> dict[str, torch.Tensor]:
    from dflash_trt.models.quant import quantized_tensor_shapes

    tensors = load_safetensors_dir(directory, "drafter", device)
    if tensors and all(name.startswith("model.") for name in tensors):  # tolerate exports that kept the prefix
        tensors = {name[len("model."):]: t for name, t in tensors.items()}
    shapes = drafter_tensor_shapes(cfg)
    allowed: set[str] = set()
    if cfg.quantization != "none":
        quantized = quantized_linear_names(tensors, shapes)
        check_quantized_tensors(tensors, shapes, quantized, cfg.quantization, directory)
        shapes = {name: shape for name, shape in shapes.items() if name[: -len(".weight")] not in quantized}
        allowed = {f"{module}.{suffix}" for module in quantized
                   for suffix in quantized_tensor_shapes(cfg.quantization, 1, 16)}
    check_tensors(tensors, shapes, "drafter", directory, allowed)
    return tensors


def quantized_linear_names(tensors: dict[str, torch.Tensor], shapes: dict[str, tuple[int, ...]]) -> set[str]:
    """Linear layers stored quantized (their weight is not a float tensor); the rest (excluded modules, norms) are
    plain float weights."""
    stored_quantized = (torch.uint8, torch.float8_e4m3fn)
    return {name[: -len(".weight")] for name, shape in shapes.items()
            if len(shape) == 2 and name.endswith(".weight") and name in tensors and tensors[name].dtype in stored_quantized}


def check_quantized_tensors(tensors: dict[str, torch.Tensor], shapes: dict[str, tuple[int, ...]], modules: set[str],
                            fmt: str, directory) -> None:
    from dflash_trt.models.quant import quantized_tensor_shapes

    if not modules:
        raise CheckpointError(
            f"drafter {directory}: {QUANT_CONFIG_NAME} says {fmt} but no linear weight is quantized; re-export the drafter"
        )
    for module in sorted(modules):
        out_features, in_features = shapes[f"{module}.weight"]
        for suffix, (shape, dtypes) in quantized_tensor_shapes(fmt, out_features, in_features).items():
            name = f"{module}.{suffix}"
            t = tensors.get(name)
            if t is None:
                raise CheckpointError(f"drafter {directory}: {fmt} layer {module!r} has no tensor {name!r}; re-export the drafter")
            if tuple(t.shape) != shape or t.dtype not in dtypes:
                raise CheckpointError(
                    f"drafter {directory}: tensor {name!r} is {str(t.dtype).replace('torch.', '')} {list(t.shape)}; "
                    f"{fmt} needs {str(dtypes[0]).replace('torch.', '')} {list(shape)} (is hf_quant_config.json for "
                    "these weights?)"
                )


# --------------------------------------------------------------------------------------------------------------------
# Target <-> drafter compatibility
# --------------------------------------------------------------------------------------------------------------------


def check_pair(target: "TargetConfig | TargetSummary", drafter: DrafterConfig, drafter_dir="drafter") -> None:
    """The drafter must have been built for this target. Checked before any weights are read."""
    where = f"drafter {Path(drafter_dir) / CONFIG_NAME}"
    if drafter.hidden_size != target.hidden_size:
        raise CheckpointError(
            f"{where}: field 'hidden_size' = {drafter.hidden_size} but the target's hidden_size is {target.hidden_size}; "
            "use the drafter trained for this target"
        )
    if drafter.vocab_size != target.vocab_size:
        raise CheckpointError(
            f"{where}: field 'vocab_size' = {drafter.vocab_size} but the target's vocab_size is {target.vocab_size}; "
            "the drafter shares the target's embedding and LM head, so they must agree"
        )
    if drafter.num_target_layers != target.num_hidden_layers:
        raise CheckpointError(
            f"{where}: field 'num_target_layers' = {drafter.num_target_layers} but the target has "
            f"{target.num_hidden_layers} layers; use the drafter trained for this target"
        )
    bad = [i for i in drafter.target_layer_ids if not 0 <= i < target.num_hidden_layers]
    if bad:
        raise CheckpointError(
            f"{where}: field 'dflash_config.target_layer_ids' = {drafter.target_layer_ids} has {bad} outside the "
            f"target's layers 0..{target.num_hidden_layers - 1}"
        )
    if not 0 <= drafter.mask_token_id < target.vocab_size:
        raise CheckpointError(
            f"{where}: field 'dflash_config.mask_token_id' = {drafter.mask_token_id} is outside the target vocabulary "
            f"(0..{target.vocab_size - 1})"
        )


# --------------------------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------------------------


def atomic_directory(final: str | os.PathLike):
    """Context manager yielding a temp dir next to `final` that replaces it only if the block succeeds."""
    import contextlib

    @contextlib.contextmanager
    def _cm():
        final_path = Path(final)
        if final_path.exists() and not final_path.is_dir():
            raise CheckpointError(f"output {str(final_path)!r} exists and is a file; pass a directory path")
        for parent in final_path.parents:
            if parent.exists() and not parent.is_dir():
                raise CheckpointError(f"output {str(final_path)!r}: {str(parent)!r} is a file, not a directory")
        prefix = f".{final_path.name}."
        tmp = make_tempdir(final_path.parent, prefix)  # a killed writer's leftovers are removed first
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; the result should be an ordinary directory
        old = final_path.parent / owned_name(prefix, "old")
        try:
            yield tmp
            if final_path.exists():  # swap: the previous contents stay intact until the new directory is complete
                os.replace(final_path, old)
            os.replace(tmp, final_path)
        finally:
            for leftover in (tmp, old):
                if leftover.exists():
                    shutil.rmtree(leftover, ignore_errors=True)

    return _cm()


def save_drafter(directory: str | os.PathLike, cfg: DrafterConfig, tensors: dict[str, torch.Tensor],
                 extra_files: dict[str, str | bytes] | None = None) -> Path:
    """Write a z-lab-format drafter directory (config.json + model.safetensors [+ extra files]), atomically."""
    from safetensors.torch import save_file

    check_tensors(tensors, drafter_tensor_shapes(cfg), "drafter", directory)
    with atomic_directory(directory) as tmp:
        (tmp / CONFIG_NAME).write_text(json.dumps(drafter_config_dict(cfg), indent=2, sort_keys=True) + "\n")
        save_file({k: v.detach().contiguous().cpu() for k in drafter_tensor_shapes(cfg) for v in [tensors[k]]},
                  str(tmp / WEIGHTS_NAME), metadata={"format": "pt"})
        for name, content in (extra_files or {}).items():
            (tmp / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return Path(directory)


def new_drafter_config(target: TargetConfig, *, num_hidden_layers: int = 5, block_size: int = 16,
                       mask_token_id: int, target_layer_ids: list[int] | None = None,
                       intermediate_size: int | None = None, dtype: torch.dtype | None = None,
                       layer_types: list[str] | None = None, sliding_window: int | None = None,
                       is_causal: bool | None = None, dflash2: dict[str, Any] | None = None) -> DrafterConfig:
    """A drafter shaped for `target` (z-lab practice: same hidden size, heads, head_dim and RoPE as the target).
    dflash2: a DFlash2 drafter's fields (conv_kernel_size, conv_group_size, selector_rank, selector_top_k, optionally
    input_embedding_scale, output_multiplier, final_logit_softcapping), validated as a config.json's would be."""
    from transformers import Qwen3Config

    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 2:
        raise ConfigError(f"block_size must be an integer >= 2 (the last verified token + at least one MASK), got {block_size!r}")
    if num_hidden_layers < 1:
        raise ConfigError(f"num_hidden_layers (drafter layers) must be >= 1, got {num_hidden_layers!r}")
    types = tuple(layer_types or ["full_attention"] * num_hidden_layers)
    if len(types) != num_hidden_layers or any(t not in DRAFTER_LAYER_TYPES for t in types):
        raise ConfigError(f"layer_types must be {num_hidden_layers} entries of {' or '.join(DRAFTER_LAYER_TYPES)}, "
                          f"got {list(types)!r}")
    if "sliding_attention" in types and (isinstance(sliding_window, bool) or not isinstance(sliding_window, int)
                                         or sliding_window < 1):
        raise ConfigError(f"sliding_window must be an integer >= 1 for sliding_attention layers, got {sliding_window!r}")
    layer_ids = target_layer_ids or default_target_layer_ids(target.num_hidden_layers, num_hidden_layers)
    hf = Qwen3Config(hidden_size=target.hidden_size, num_attention_heads=target.num_attention_heads,
                     num_key_value_heads=target.num_key_value_heads, head_dim=target.head_dim,
                     num_hidden_layers=num_hidden_layers, vocab_size=target.vocab_size)
    cfg = DrafterConfig(
        hidden_size=target.hidden_size,
        intermediate_size=intermediate_size or target.intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=target.num_attention_heads,
        num_key_value_heads=target.num_key_value_heads,
        head_dim=target.head_dim,
        rms_norm_eps=target.rms_norm_eps,
        vocab_size=target.vocab_size,
        attention_bias=False,
        rope=dict(target.rope),
        dtype=dtype or target.dtype,
        hf_config=target.hf_config if target.rope.get("rope_type", "default") != "default" else hf,
        num_target_layers=target.num_hidden_layers,
        block_size=block_size,
        mask_token_id=mask_token_id,
        target_layer_ids=list(layer_ids),
        layer_types=types if "sliding_attention" in types else (),
        sliding_window=sliding_window if "sliding_attention" in types else None,
        is_causal=is_causal,
    )
    if dflash2 is not None:
        try:
            fields = _dflash2_fields({"dflash_config": dict(dflash2), "hidden_size": cfg.hidden_size,
                                      "vocab_size": cfg.vocab_size}, Path("<new_drafter_config>"))
        except CheckpointError as err:
            raise ConfigError(str(err)) from None
        cfg = dataclasses.replace(cfg, **fields)
    check_pair(target, cfg)
    return cfg


def load_tokenizer(target_dir: str | os.PathLike):
    """transformers' AutoTokenizer from the target directory (local files only, no remote code); None if absent."""
    d = Path(target_dir)
    if not any((d / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")):
        return None
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(d), local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError) as err:
        raise CheckpointError(f"target {d}: tokenizer files exist but cannot be loaded ({err}); fix or remove them") from None
