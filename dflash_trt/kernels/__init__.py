"""Per-op torch references of the spec step. The CUDA kernels in plugins/ replace them one for one on GPU and are
tested against them; on CPU these references are what runs."""
