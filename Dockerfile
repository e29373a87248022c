# syntax=docker/dockerfile:1
#
# dflash-trt for NVIDIA DGX B300 (sm_103), also B200 (sm_100) and H100/H200 (sm_90).
#
#   docker build -t dflash-trt:b300 .
#   docker run --rm --gpus all --ipc=host --ulimit memlock=-1 --ulimit stack=67108864 dflash-trt:b300 doctor
#
# Deployment, volumes and the gpt-oss-120b TP8 recipe: docs/deploy-b300.md.
#
# Base images (why these tags):
# * TRTLLM_IMAGE: the TensorRT-LLM NGC release image. DFlash needs `tensorrt_llm.llmapi.DFlashDecodingConfig`, added
#   by TensorRT-LLM PR #12794 (opened 2026-04-07). Verified in the per-release docs TensorRT-LLM publishes (its
#   rendered tensorrt_llm/llmapi/llm_args.py and API reference): 1.3.0rc13 has PARDDecodingConfig followed directly by
#   AutoDecodingConfig, 1.3.0rc14 has `class DFlashDecodingConfig` between them (mask_token_id, target_layer_ids; no
#   attention_backend yet) => first release 1.3.0rc14. 1.3.0rc27's reference adds `attention_backend` VANILLA | TRTLLM
#   | FA4 (TRTLLM = the sm_100/sm_103 drafter attention a B300 wants; dflash-trt's LLM-API options may set it).
#   1.3.0rc27 is pinned: the newest 1.3 release whose DFlash API was checked. No Triton `trtllm-python-py3` image can
#   be used instead: Triton's compatibility matrix lists TensorRT-LLM 1.2.1 (no DFlash) for 26.04 through 26.07,
#   the newest rows there. The build below fails if the pinned image lacks DFlashDecodingConfig.
# * TRITON_IMAGE: Triton server + Python backend are copied from the Triton image the way TensorRT-LLM's own
#   docker/Dockerfile.multi builds its `tritondevel` stage (bin, lib, include, caches, backends/python, then the
#   runtime packages of its docker/common/install_triton.sh). The tag should match the PyTorch NGC base of the
#   TensorRT-LLM release (Ubuntu 24.04, Python 3.12, CUDA 13); 26.07 (CUDA 13.3.1) is inferred, not verified: the
#   build checks that tritonserver and the Python backend stub find every shared library they need.
# * CUDA_DEVEL_IMAGE: only the plugin build stage uses it; CUDA 13.0, the nvcc the tests build the plugins with.
ARG TRTLLM_IMAGE=nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc27
ARG TRITON_IMAGE=nvcr.io/nvidia/tritonserver:26.07-py3
ARG CUDA_DEVEL_IMAGE=nvcr.io/nvidia/cuda:13.0.2-devel-ubuntu24.04

# ---- stage 1: the CUDA plugins (plugins/ -> libdflash_plugins.so) ------------------------------------------------------
FROM ${CUDA_DEVEL_IMAGE} AS plugins
# Architectures to compile, as scripts/build_plugins.sh takes them (plain sm_XY cubins: an sm_100a cubin would not
# load on a B300). tests/test_docker.py builds the library with this same default through the same script.
ARG DFLASH_CUDA_ARCHS="90 100 103"
WORKDIR /src
COPY scripts/build_plugins.sh scripts/build_plugins.sh
COPY plugins/include plugins/include
COPY plugins/src plugins/src
RUN DFLASH_CUDA_ARCHS="${DFLASH_CUDA_ARCHS}" DFLASH_NO_PIP=1 DFLASH_PLUGINS_BUILD_DIR=/out \
    bash scripts/build_plugins.sh --force

# ---- stage 2: Triton server + Python backend, as shipped in the Triton image ------------------------------------------
FROM ${TRITON_IMAGE} AS triton

# ---- stage 3: the runtime image ----------------------------------------------------------------------------------------
FROM ${TRTLLM_IMAGE} AS runtime
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

COPY --from=triton /opt/tritonserver/bin /opt/tritonserver/bin
COPY --from=triton /opt/tritonserver/lib /opt/tritonserver/lib
COPY --from=triton /opt/tritonserver/include /opt/tritonserver/include
COPY --from=triton /opt/tritonserver/caches /opt/tritonserver/caches
COPY --from=triton /opt/tritonserver/backends/python /opt/tritonserver/backends/python
ENV PATH=/opt/tritonserver/bin:${PATH} \
    LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH}:}/opt/tritonserver/lib
# Triton's runtime libraries: the package list of TensorRT-LLM's docker/common/install_triton.sh. Versions come from
# the base image's own apt sources (Ubuntu + NVIDIA's CUDA repository), which is what they were built against.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends pigz libxml2-dev libre2-dev libnuma-dev libb64-dev libarchive-dev \
       datacenter-gpu-manager-4-cuda13 \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* \
    && for f in /opt/tritonserver/bin/tritonserver /opt/tritonserver/backends/python/triton_python_backend_stub; do \
         test -x "$f" || { echo "missing $f" >&2; exit 1; }; \
         if ldd "$f" | grep "not found"; then echo "$f: unresolved shared libraries" >&2; exit 1; fi; \
       done

WORKDIR /opt/dflash-trt
COPY --from=plugins /out/libdflash_plugins.so plugins/libdflash_plugins.so
COPY setup.py src/setup.py
COPY dflash_trt src/dflash_trt
COPY scripts/image_constraints.py scripts/image_constraints.py
COPY build_configs build_configs
COPY data/prompts data/prompts
# Install dflash-trt and only what it adds: every package the image already has is pinned to its installed version
# (scripts/image_constraints.py freeze), so pip can add packages but never replace torch, TensorRT-LLM, transformers,
# ...; a dependency that would need a different version fails the build instead. `verify` re-checks that nothing
# pinned changed. Not editable, no build isolation (the image's own setuptools builds it, no index needed for that).
RUN python3 scripts/image_constraints.py freeze > image-constraints.txt \
    && PIP_CONSTRAINT=/opt/dflash-trt/image-constraints.txt PIP_BREAK_SYSTEM_PACKAGES=1 \
       python3 -m pip install --no-cache-dir --no-build-isolation ./src \
    && python3 scripts/image_constraints.py verify image-constraints.txt \
    && rm -rf src
ENV DFLASH_PLUGINS_LIB=/opt/dflash-trt/plugins/libdflash_plugins.so
# Fail the build, not the deployment: TensorRT-LLM must define DFlashDecodingConfig, Triton and its Python backend
# must be there, and the plugin library must load and hold the code it says it was built for.
RUN dflash-trt doctor --require trtllm-dflash --require triton-python --require plugins

# Run as a non-root user; /models (checkpoints, mount read-only) and /engines (engine directories) belong to it.
RUN useradd --create-home --no-log-init --uid 10001 --user-group dflash \
    && mkdir -p /models /engines \
    && chown dflash:dflash /models /engines
USER 10001:10001
ENV HF_HOME=/home/dflash/.cache/huggingface

# Triton: 8000 HTTP (KServe v2 + /v2/health/ready), 8001 gRPC, 8002 Prometheus metrics. `serve --api openai` serves
# the OpenAI API on 8000 too (/v1/..., /health, /metrics; FastAPI, uvicorn and prometheus_client come with
# TensorRT-LLM), and a backend-trtllm engine directory is served by TensorRT-LLM's trtllm-serve on 8000 (OpenAI API +
# /health) with either --api: the probe takes Triton's /v2/health/ready or /health.
EXPOSE 8000 8001 8002
HEALTHCHECK --interval=30s --timeout=5s --start-period=900s --retries=3 \
    CMD ["python3", "-c", "import sys, urllib.request as u\nfor p in ('/v2/health/ready', '/health'):\n    try:\n        u.urlopen('http://127.0.0.1:8000' + p, timeout=2)\n        sys.exit(0)\n    except OSError:\n        pass\nsys.exit(1)"]
ENTRYPOINT ["dflash-trt"]
CMD ["doctor"]
