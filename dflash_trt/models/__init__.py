"""Models: the target (the native Qwen3 / Llama decoder, or another family's transformers module: hf_target.py, loaded
through `load_target`), the DFlash drafter, and the pre-allocated KV cache they share."""

from dflash_trt.models.drafter import DFlashDrafter
from dflash_trt.models.kv_cache import KVCache
from dflash_trt.models.target import TargetModel, load_target

__all__ = ["DFlashDrafter", "KVCache", "TargetModel", "load_target"]
