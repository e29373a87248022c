#!/usr/bin/env bash
# Build plugins/build/libdflash_plugins.so: the CUDA kernels of the spec step (plugins/src) behind the C ABI of
# plugins/include/dflash_plugins.h, one shared library with cubins for sm_90 (H100/H200), sm_100 (B200) and sm_103
# (B300) plus PTX of the newest, the CUDA runtime linked statically (the .so loads without libcudart or a GPU).
#
#   scripts/build_plugins.sh [--force] [--quiet]
#
# Environment:
#   DFLASH_CUDA_ARCHS        archs to build, default "90 100 103" (e.g. "80 90" for an A100 dev box)
#   DFLASH_PLUGINS_BUILD_DIR output directory, default plugins/build
#   DFLASH_NVCC_THREADS      nvcc --threads (archs compiled in parallel), default min(#archs, nproc)
#   NVCC                     the nvcc to use; otherwise nvcc on PATH, $CUDA_HOME/bin/nvcc, /usr/local/cuda/bin/nvcc,
#                            a toolkit previously installed from PyPI into plugins/build/cuda-toolkit, and last
#                            `python -m pip install --target plugins/build/cuda-toolkit nvidia-cuda-nvcc==13.0.*
#                            nvidia-cuda-runtime nvidia-cuda-crt nvidia-nvvm nvidia-cuda-cccl` (CUDA 13 from PyPI,
#                            ~0.3 GB, kept out of the Python environment; override the place with
#                            DFLASH_CUDA_TOOLKIT_DIR)
#   DFLASH_CUDA_PIP_VERSION  the CUDA version spec for that fallback, default "13.0.*"
#   DFLASH_NO_PIP=1          never pip install; fail if no nvcc is found
#   DFLASH_PIP_TOOLKIT=1     skip the system nvcc search: use (or install) the PyPI toolkit (tests the clean-clone path)
#
# Up to date (same sources, flags and nvcc) -> nothing is rebuilt unless --force. Exit 0 = library in place.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/plugins/src"
INC="$ROOT/plugins/include"
OUT_DIR="${DFLASH_PLUGINS_BUILD_DIR:-$ROOT/plugins/build}"
LIB="$OUT_DIR/libdflash_plugins.so"
TOOLKIT="${DFLASH_CUDA_TOOLKIT_DIR:-$ROOT/plugins/build/cuda-toolkit}"
ARCHS="${DFLASH_CUDA_ARCHS:-90 100 103}"
PIP_VERSION="${DFLASH_CUDA_PIP_VERSION:-13.0.*}"
FORCE=0
QUIET=0
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    --quiet) QUIET=1 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_plugins.sh: unknown argument '$arg' (use --force, --quiet)" >&2; exit 2 ;;
  esac
done
say() { [ "$QUIET" = 1 ] || echo "$@"; }

# ---- find nvcc -------------------------------------------------------------------------------------------------------
EXTRA_INC=()
EXTRA_LIB=()
pip_toolkit_nvcc() {  # the PyPI wheels put everything under <target>/nvidia/cu13/{bin,include,lib,nvvm}
  local top="$TOOLKIT/nvidia/cu13" f
  for f in bin/nvcc nvvm/bin/cicc include/cuda_runtime.h include/nv/target lib/libcudart_static.a; do
    [ -e "$top/$f" ] || return 1
  done
  NVCC="$top/bin/nvcc"
  # nvcc.profile points at targets/<arch>/include and lib, which the wheels do not have: name them directly.
  EXTRA_INC=(-I"$top/include")
  EXTRA_LIB=(-L"$top/lib")
}
if [ -n "${NVCC:-}" ]; then
  :
elif [ "${DFLASH_PIP_TOOLKIT:-0}" = 1 ]; then
  :
elif command -v nvcc >/dev/null 2>&1; then
  NVCC="$(command -v nvcc)"
elif [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then
  NVCC="$CUDA_HOME/bin/nvcc"
elif [ -x /usr/local/cuda/bin/nvcc ]; then
  NVCC=/usr/local/cuda/bin/nvcc
fi
if [ -n "${NVCC:-}" ]; then
  :
elif pip_toolkit_nvcc; then
  :
elif [ "${DFLASH_NO_PIP:-0}" = 1 ]; then
  echo "build_plugins.sh: nvcc not found (PATH, \$NVCC, \$CUDA_HOME, /usr/local/cuda) and DFLASH_NO_PIP=1" >&2
  exit 3
else
  PY="${PYTHON:-$(command -v python3 || command -v python || true)}"
  if [ -z "$PY" ]; then
    echo "build_plugins.sh: nvcc not found and no python to pip install it with; install the CUDA 13 toolkit" >&2
    exit 3
  fi
  say "nvcc not found: installing CUDA $PIP_VERSION compiler + runtime from PyPI into $TOOLKIT"
  mkdir -p "$TOOLKIT"
  if ! "$PY" -m pip install --quiet --disable-pip-version-check --no-warn-script-location --upgrade --target "$TOOLKIT" \
      "nvidia-cuda-nvcc==$PIP_VERSION" "nvidia-cuda-runtime==$PIP_VERSION" "nvidia-cuda-crt==$PIP_VERSION" \
      "nvidia-nvvm==$PIP_VERSION" "nvidia-cuda-cccl==$PIP_VERSION" >&2; then
    echo "build_plugins.sh: nvcc not found and 'pip install nvidia-cuda-nvcc==$PIP_VERSION' failed;" \
         "install the CUDA 13 toolkit or set NVCC" >&2
    exit 3
  fi
  if ! pip_toolkit_nvcc; then
    echo "build_plugins.sh: pip installed the CUDA wheels but $TOOLKIT/nvidia/cu13 lacks nvcc, cicc, cuda_runtime.h," \
         "nv/target or libcudart_static.a" >&2
    exit 3
  fi
fi
NVCC_VERSION="$("$NVCC" --version | tail -n 2 | tr '\n' ' ')"

# ---- flags -----------------------------------------------------------------------------------------------------------
GENCODE=()
ARCH_LIST=""
LAST=""
for a in $ARCHS; do
  case "$a" in *[!0-9]*|"") echo "build_plugins.sh: DFLASH_CUDA_ARCHS entry '$a' is not a number like 90" >&2; exit 2 ;; esac
  GENCODE+=(-gencode "arch=compute_$a,code=sm_$a")
  ARCH_LIST="${ARCH_LIST:+$ARCH_LIST,}sm_$a"
  LAST="$a"
done
[ -n "$LAST" ] || { echo "build_plugins.sh: DFLASH_CUDA_ARCHS is empty" >&2; exit 2; }
GENCODE+=(-gencode "arch=compute_$LAST,code=compute_$LAST")  # PTX of the newest: JIT-compiled on later GPUs
ARCH_LIST="$ARCH_LIST,compute_$LAST"
NARCH=$(echo $ARCHS | wc -w)
NPROC=$(nproc 2>/dev/null || echo 1)
THREADS="${DFLASH_NVCC_THREADS:-$(( NARCH < NPROC ? NARCH : NPROC ))}"
FLAGS=(-std=c++17 -O3 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -shared -cudart static
       --threads "$THREADS" -DDFLASH_COMPILED_ARCHS="\"$ARCH_LIST\"" -I"$INC" ${EXTRA_INC[@]+"${EXTRA_INC[@]}"} ${EXTRA_LIB[@]+"${EXTRA_LIB[@]}"}
       "${GENCODE[@]}")

# ---- up to date? -----------------------------------------------------------------------------------------------------
mkdir -p "$OUT_DIR"
# one build at a time per output directory (parallel test workers both ask for the library): a second run waits, then
# finds it up to date
if command -v flock >/dev/null 2>&1; then
  exec 9>"$OUT_DIR/.build.lock"
  flock 9
fi
STAMP="$OUT_DIR/libdflash_plugins.stamp"
SOURCES=("$SRC"/*.cu "$SRC"/*.cuh "$INC"/*.h)
WANT="$( (cat "${SOURCES[@]}"; echo "${FLAGS[*]}"; echo "$NVCC_VERSION") | sha256sum | cut -d' ' -f1)"
if [ "$FORCE" = 0 ] && [ -f "$LIB" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  say "up to date: $LIB ($ARCH_LIST)"
  exit 0
fi

# ---- build -----------------------------------------------------------------------------------------------------------
say "building $LIB for $ARCH_LIST with $NVCC ($NVCC_VERSION)"
TMP="$(mktemp "$OUT_DIR/.libdflash_plugins.XXXXXX.so")"
trap 'rm -f "$TMP"' EXIT
START=$(date +%s)
"$NVCC" "${FLAGS[@]}" -o "$TMP" "$SRC/dflash_plugins.cu"
chmod 0755 "$TMP"  # mktemp made it 0600
mv -f "$TMP" "$LIB"
trap - EXIT
echo "$WANT" > "$STAMP"
SECONDS_TAKEN=$(( $(date +%s) - START ))
say "built $LIB: $(stat -c %s "$LIB") bytes in ${SECONDS_TAKEN}s ($ARCH_LIST)"
