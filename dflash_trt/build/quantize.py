"""Drafter quantization with NVIDIA ModelOpt: FP8 or NVFP4 for the drafter's linear layers, calibrated on real
context features, exported in ModelOpt's unified Hugging Face format in z-lab layout.

* What is quantized: the drafter's own nn.Linear layers (`fc`, q/k/v/o_proj, gate/up/down_proj) — never the target,
  whose embedding and LM head the drafter borrows. For backend trtllm, `fc` and q/k/v stay in the model dtype: its
  DFlash loader runs them as plain torch Linears over the raw weights (docs/trtllm.md).
* Calibration: `mtq.quantize(drafter, cfg, forward_loop)` where the forward loop is the torch engine's own speculative
  loop over the calibration prompts. The drafter therefore sees exactly what it sees when serving: the target's hidden
  states at target_layer_ids for the prompt and for every verified token, fused by fc, injected as K/V, and blocks of
  [last token, MASK...]. (ModelOpt converts the drafter's Linear modules in place, so the engine runs them with their
  quantizers collecting ranges.)
* Export: `modelopt.torch.export.export_hf_checkpoint` on a thin transformers PreTrainedModel that holds the drafter's
  modules under their z-lab names (`layers.N...`, `fc`, `hidden_norm`, `norm`: no `model.` prefix). It writes the
  quantized safetensors (FP8: float8_e4m3fn weight + weight_scale + input_scale; NVFP4: packed uint8 E2M1 pairs +
  float8_e4m3fn per-16 weight_scale + weight_scale_2 + input_scale) and `hf_quant_config.json`. dflash-trt then writes
  the z-lab config.json (DFlash fields + `quantization_config`) and the right `exclude_modules`.
"""

from __future__ import annotations

import contextlib
import copy
import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import torch

from dflash_trt import checkpoint as ckpt
from dflash_trt.errors import ConfigError

MODELOPT_MISSING = ("drafter quantization needs NVIDIA ModelOpt (the nvidia-modelopt package), which is not installed "
                    "here: pip install 'dflash-trt[quant]', or set quantization.format: none")
_BASE_CONFIGS = {"fp8": "FP8_DEFAULT_CFG", "nvfp4": "NVFP4_DEFAULT_CFG"}


def import_modelopt():
    """(modelopt.torch.quantization, export_hf_checkpoint, convert_hf_quant_config_format), or one ConfigError."""
    try:
        with warnings.catch_warnings():  # it warns about untested transformers versions on import; quantize() is ours
            warnings.simplefilter("ignore")
            import modelopt.torch.quantization as mtq
            from modelopt.torch.export import export_hf_checkpoint
            from modelopt.torch.export.convert_hf_config import convert_hf_quant_config_format
    except ImportError as err:
        raise ConfigError(f"{MODELOPT_MISSING} ({err})") from None
    return mtq, export_hf_checkpoint, convert_hf_quant_config_format


def modelopt_version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("nvidia-modelopt")
    except importlib.metadata.PackageNotFoundError:
        return None


def quant_config(mtq, fmt: str, unquantized_modules: list[str]) -> dict:
    """ModelOpt's default FP8 / NVFP4 recipe (weights and inputs, max calibration) with the listed drafter modules'
    quantizers disabled."""
    if fmt not in _BASE_CONFIGS:
        raise ConfigError(f"quantization.format {fmt!r} is not one of {sorted(_BASE_CONFIGS)}")
    cfg = copy.deepcopy(getattr(mtq, _BASE_CONFIGS[fmt]))
    cfg["quant_cfg"] = list(cfg["quant_cfg"]) + [{"quantizer_name": f"{m}.*", "enable": False} for m in unquantized_modules]
    return cfg


def _export_model(drafter):
    """A transformers PreTrainedModel over the drafter's modules, named as the z-lab checkpoint names them, which
    ModelOpt's HF exporter can save. Its forward (used by the exporter to find linears that share an input) is one
    drafter block over two context rows."""
    from transformers import PreTrainedModel, Qwen3Config

    class DFlashDraftExport(PreTrainedModel):
        config_class = Qwen3Config

        def __init__(self, config, drafter):
            super().__init__(config)
            self.layers, self.fc, self.hidden_norm, self.norm = drafter.layers, drafter.fc, drafter.hidden_norm, drafter.norm
            object.__setattr__(self, "_drafter", drafter)  # not a submodule: its rotary buffer is not a weight

        def get_dummy_inputs(self):
            d = self._drafter
            b, h, w = d.block_size, d.cfg.hidden_size, d.fc.weight
            c = 2
            return dict(block_embeds=torch.ones(1, b, h, dtype=w.dtype, device=w.device),
                        block_positions=torch.arange(c, c + b, device=w.device)[None],
                        context=torch.ones(1, c, d.fc.in_features, dtype=w.dtype, device=w.device),
                        context_positions=torch.arange(c, device=w.device)[None],
                        visible=torch.ones(1, b, c + b, dtype=torch.bool, device=w.device))

        def forward(self, **inputs):
            return self._drafter.forward_train(**inputs)

    config_dict = ckpt.drafter_config_dict(drafter.cfg)
    config = Qwen3Config(**{k: v for k, v in config_dict.items() if k not in ("dtype", "torch_dtype")})
    config.architectures = [ckpt.DRAFTER_ARCHITECTURE]
    return DFlashDraftExport(config, drafter)


def quantize_drafter(engine, fmt: str, calibration_ids: list[list[int]], max_new_tokens: int,
                     unquantized_modules: list[str], exclude_modules: list[str] | None, out_dir: Path, *,
                     progress: bool = True) -> dict:
    """Quantize `engine.drafter` in place (it is unusable afterwards: load the written directory instead) and write
    the quantized z-lab drafter to `out_dir`. exclude_modules: the `exclude_modules` to record (None = ModelOpt's).
    Returns facts for the manifest."""
    from dflash_trt.build.gate import run_prompts

    mtq, export_hf_checkpoint, convert_format = import_modelopt()
    cfg = quant_config(mtq, fmt, unquantized_modules)
    drafter = engine.drafter
    dtype = drafter.fc.weight.dtype

    def forward_loop(_model) -> None:  # the engine's spec loop: real context features, real blocks
        run_prompts(engine, calibration_ids, max_new_tokens, verify_len=None, desc=f"calibrate {fmt}",
                    progress=progress)

    # ModelOpt prints progress to stdout; stdout is the build's result (--json), so its chatter goes to stderr.
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        mtq.quantize(drafter, cfg, forward_loop)
    quantized = sorted(name for name, m in drafter.named_modules()
                       if getattr(getattr(m, "weight_quantizer", None), "is_enabled", False))
    if not quantized:
        raise ConfigError(f"ModelOpt quantized no drafter layer for format {fmt} (unquantized: {unquantized_modules})")

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=False)
    # The engine's CPU layout (models/layers.Fused) leaves nn.Linear weights as transposed views; transformers'
    # save_pretrained flattens each tensor with view(-1): give the exporter contiguous parameters.
    for module in drafter.modules():
        for name, param in list(module.named_parameters(recurse=False)):
            if not param.is_contiguous():
                setattr(module, name, torch.nn.Parameter(param.detach().contiguous(), requires_grad=False))
    export_dir = Path(tempfile.mkdtemp(prefix=".modelopt-export.", dir=out_dir.parent))
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
            warnings.simplefilter("ignore")
            export_hf_checkpoint(_export_model(drafter), dtype=dtype, export_dir=export_dir)
        hf_quant = json.loads((export_dir / "hf_quant_config.json").read_text())
        if exclude_modules is not None:
            hf_quant["quantization"]["exclude_modules"] = list(exclude_modules)
        weights = sorted(export_dir.glob("*.safetensors"))
        for f in weights + sorted(export_dir.glob("*.safetensors.index.json")):
            shutil.move(str(f), out_dir / f.name)
    finally:
        shutil.rmtree(export_dir, ignore_errors=True)
    config = ckpt.drafter_config_dict(drafter.cfg)
    config["dtype"] = config["torch_dtype"] = str(dtype).removeprefix("torch.")
    config["quantization_config"] = convert_format(hf_quant)
    (out_dir / ckpt.QUANT_CONFIG_NAME).write_text(json.dumps(hf_quant, indent=2) + "\n")
    (out_dir / ckpt.CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    # What was written must load through the normal drafter checks (names, shapes, dtypes of every scale).
    written = ckpt.load_drafter_config(out_dir)
    ckpt.load_drafter_tensors(out_dir, written)
    print(f"quantized {len(quantized)} drafter linears to {fmt}; kept {len(unquantized_modules)} in "
          f"{str(dtype).removeprefix('torch.')}", file=sys.stderr)
    return {"quantized_modules": quantized, "unquantized_modules": list(unquantized_modules),
            "exclude_modules": hf_quant["quantization"].get("exclude_modules", []),
            "quant_algo": hf_quant["quantization"].get("quant_algo"), "modelopt_version": modelopt_version()}
