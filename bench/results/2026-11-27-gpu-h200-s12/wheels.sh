#!/usr/bin/env bash
# The .whl/ folder these runs carried to the H200 (git-excluded; rebuild it here, in the repo root, before a device run).
# The device image has torch 2.11+cu130, numpy, packaging, pyyaml, regex, tqdm, click, filelock, fsspec, idna, rich, ...
# but older or no transformers / tokenizers / huggingface_hub / fastapi / uvicorn / pydantic / openai.
# Each run then starts with:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
#   export PYTHONPATH=$PWD:/tmp/site
# and the call names .whl in `carry`. The tree plus .whl must stay under the device's 64 MiB (the tree is ~35 MB):
# hf_xet and openai can be left out when the server bench does not run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
grep -qx "/.whl/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo /.whl/ >> .git/info/exclude; }
rm -rf .whl
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 -d .whl \
  transformers==5.24.0 huggingface_hub==2.4.0 tokenizers==0.23.3 fastapi==0.165.0 uvicorn==0.54.0 openai==3.57.0 \
  prometheus_client pydantic==2.13.4
# what the image has already (one version of each: two stop the install)
(cd .whl && rm -f numpy-* pygments-* markdown_it* mdurl* rich-* packaging-* pyyaml-* tqdm-* idna-* click-* filelock-* \
  fsspec-* regex-*)
du -sh --apparent-size .whl
