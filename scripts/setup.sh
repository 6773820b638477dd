#!/usr/bin/env bash
# Idempotent set-up: installs what is missing (Debian packages with apt-get), then configures the
# CMake build in build/. Every Makefile target runs it first, so a fresh Debian machine needs nothing
# but `make run` or `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages nmkit builds, tests and benchmarks with (baselines: OpenBLAS, oneDNN, Eigen).
packages=(cmake g++ make git python3 python3-pip unzip
          libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libfmt-dev
          libeigen3-dev libopenblas-dev libdnnl-dev
          # the tokenizer's pre-tokenizer regexes (UTF + Unicode properties), found by pkg-config
          libpcre2-dev pkg-config
          # LAPACKE: the C interface to LAPACK (Cholesky for SparseGPT, src/calib).
          liblapacke-dev
          # RE2: --include/--exclude match in linear time without recursion (issue 13, C2).
          libre2-dev
          # oneDNN's CMake config looks for OpenCL and stops the configure without it; apt-get only
          # recommends the package, and recommendations are not installed here.
          ocl-icd-opencl-dev
          # CI's fuzz job (scripts/fuzz.sh): clang with libFuzzer and its sanitizer runtimes.
          clang libclang-rt-14-dev
          # CI's sanitizer jobs build their test binaries side by side with Ninja (scripts/sanitize.sh).
          ninja-build)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# numpy: the independent float64 re-implementation that the end-to-end tests check nmkit against.
if ! python3 -c 'import numpy' 2>/dev/null; then
  echo "setup: installing numpy (pip)" >&2
  python3 -m pip install --quiet numpy 2>/dev/null || python3 -m pip install --quiet --break-system-packages numpy
fi

# tokenizers + gguf: the independent oracles of the tokenizer test (tests/tokenizer), which builds
# `tokenizers` tokenizers from SmolLM2's vocabulary read with the `gguf` reader, and of nmkit's GGUF
# reader, dequantization and writer (tests/gguf). gguf is pinned: the oracle's float32 operation
# order is its code's.
for spec in tokenizers gguf==0.19.0; do
  module=${spec%%==*}
  if ! python3 -c "import $module" 2>/dev/null; then
    echo "setup: installing $spec (pip)" >&2
    python3 -m pip install --quiet "$spec" 2>/dev/null || python3 -m pip install --quiet --break-system-packages "$spec"
  fi
done

# The GPU path's headers and tools (CUTLASS, cuSPARSELt, cuobjdump) where nvcc is installed: CMake's
# NMKIT_CUDA is on exactly then (docs/design.md section 14).
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  bash scripts/setup_cuda.sh
fi

# The Python package (docs/design.md 15; `make test` builds it into build/python and runs its tests):
# nanobind builds the extension module, pytest runs tests/python. torch is optional (its tests skip
# without it) and not installed here: it is large.
for module in nanobind pytest; do
  if ! python3 -c "import $module" 2>/dev/null; then
    echo "setup: installing $module (pip)" >&2
    python3 -m pip install --quiet "$module" 2>/dev/null || python3 -m pip install --quiet --break-system-packages "$module"
  fi
done

# `scripts/setup.sh chart` (what `make accuracy` runs): matplotlib, which scripts/accuracy_chart.py
# draws the accuracy chart with (issue 28). Not needed to build or test: the chart's test skips without it.
if [ "${1:-}" = chart ] && ! python3 -c 'import matplotlib' 2>/dev/null; then
  echo "setup: installing matplotlib (pip)" >&2
  python3 -m pip install --quiet matplotlib 2>/dev/null || python3 -m pip install --quiet --break-system-packages matplotlib
fi

# A configure that failed leaves a cache but no build files: configure again then. A build folder
# configured before the Python package existed gets NMKIT_PYTHON turned on.
if [ ! -f build/CMakeCache.txt ] || { [ ! -f build/Makefile ] && [ ! -f build/build.ninja ]; }; then
  # NMKIT_UNITY_BUILD=ON (what .ci/run sets) compiles each target's files in batches: a clean build
  # in about half the time, an edit then recompiling its whole batch.
  # Ninja for a new build folder: it keeps both cores busy across targets where CMake's Makefiles
  # let one sit idle at each target's last batch (docs/data.md "CI time"). A folder configured
  # before keeps its generator (CMake cannot switch it); `make` drives either through cmake --build.
  generator=()
  if [ ! -f build/CMakeCache.txt ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
  cmake "${generator[@]}" -S . -B build -DCMAKE_BUILD_TYPE=Release -DNMKIT_WERROR=ON -DNMKIT_PYTHON=ON \
        -DCMAKE_UNITY_BUILD="${NMKIT_UNITY_BUILD:-OFF}"
elif ! grep -q '^NMKIT_PYTHON:BOOL=ON' build/CMakeCache.txt; then
  cmake -S . -B build -DNMKIT_PYTHON=ON >/dev/null
fi
