#!/usr/bin/env bash
# The GPU path's build dependencies (docs/design.md section 14), from PyPI wheels unpacked into the
# git-ignored .cache/cuda (no pip install: only headers, one library and two tools are needed):
#   cutlass/include, cutlass/util/include  CUTLASS 4.x headers (nvidia-cutlass, --no-deps): the
#                                          SparseGemm kernels and the host oracle of the SM80 metadata
#   cusparselt/include, cusparselt/lib     cuSPARSELt 0.10.0 (header; the library is loaded at run time)
#   bin/cuobjdump, bin/nvdisasm            SASS of the compile checks (the toolkit here has only nvcc)
#   googletest                             Debian's GoogleTest sources (libgtest-dev), for the build of
#                                          scripts/gpu_check.sh on a GPU machine that has no GoogleTest
# Run by scripts/setup.sh when nvcc is found; idempotent. The GPU machine reaches no network: its
# call carries .cache/cuda/cutlass, .cache/cuda/cusparselt/include and .cache/cuda/googletest
# (scripts/gpu_check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

dest=.cache/cuda
wheels=.cache/pip
cutlass=nvidia-cutlass==4.2.0.0
cusparselt=nvidia-cusparselt-cu13==0.10.0
tools=(nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37)

fetch() {  # fetch SPEC: the wheel's path (downloaded once into .cache/pip)
  local name=${1%%==*} version=${1##*==}
  local pattern="$wheels/${name//-/_}-$version-*.whl"
  if ! compgen -G "$pattern" >/dev/null; then
    echo "setup_cuda: downloading $1 (pip)" >&2
    python3 -m pip download --quiet --no-deps --dest "$wheels" "$1" >&2
  fi
  compgen -G "$pattern" | head -n 1
}

mkdir -p "$wheels" "$dest"
if [ ! -f "$dest/cutlass/include/cutlass/gemm/device/gemm_sparse_with_visitor.h" ]; then
  wheel=$(fetch "$cutlass")
  tmp=$(mktemp -d)
  unzip -q -o "$wheel" 'cutlass_library/source/include/*' 'cutlass_library/source/tools/util/include/*' -d "$tmp"
  rm -rf "$dest/cutlass" && mkdir -p "$dest/cutlass/util"
  mv "$tmp/cutlass_library/source/include" "$dest/cutlass/include"
  mv "$tmp/cutlass_library/source/tools/util/include" "$dest/cutlass/util/include"
  rm -rf "$tmp"
fi
if [ ! -f "$dest/cusparselt/lib/libcusparseLt.so.0" ]; then
  wheel=$(fetch "$cusparselt")
  tmp=$(mktemp -d)
  unzip -q -o "$wheel" 'nvidia/cu13/include/*' 'nvidia/cu13/lib/*' -d "$tmp"
  rm -rf "$dest/cusparselt" && mkdir -p "$dest/cusparselt"
  mv "$tmp/nvidia/cu13/include" "$tmp/nvidia/cu13/lib" "$dest/cusparselt/"
  rm -rf "$tmp"
fi
for spec in "${tools[@]}"; do
  tool=${spec%%==*}; tool=${tool#nvidia-cuda-}
  if [ ! -x "$dest/bin/$tool" ]; then
    wheel=$(fetch "$spec")
    mkdir -p "$dest/bin"
    unzip -q -o -j "$wheel" "*/bin/$tool" -d "$dest/bin"
    chmod +x "$dest/bin/$tool"
  fi
done
if [ ! -f "$dest/googletest/CMakeLists.txt" ] && [ -f /usr/src/googletest/CMakeLists.txt ]; then
  cp -r /usr/src/googletest "$dest/googletest"
fi
