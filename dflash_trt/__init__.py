"""dflash-trt: DFlash block-diffusion speculative decoding, built and served on NVIDIA GPUs."""

from dflash_trt.errors import CheckpointError, ConfigError, DFlashError, RequestError
from dflash_trt.spec.sampling import SamplingParams

__version__ = "0.1.0"

__all__ = ["CheckpointError", "ConfigError", "DFlashError", "RequestError", "SamplingParams", "TorchEngine"]


def __getattr__(name):
    # The engine pulls in the models; keep `import dflash_trt` light for the CLI's argument parsing.
    if name == "TorchEngine":
        from dflash_trt.engines.torch_engine import TorchEngine

        return TorchEngine
    raise AttributeError(name)
