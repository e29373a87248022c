"""Models: the target decoder (Qwen3 / Llama), the DFlash drafter, and the pre-allocated KV cache they share."""

from dflash_trt.models.drafter import DFlashDrafter
from dflash_trt.models.kv_cache import KVCache
from dflash_trt.models.target import TargetModel

__all__ = ["DFlashDrafter", "KVCache", "TargetModel"]
