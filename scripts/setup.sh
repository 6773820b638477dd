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
          # RE2: --include/--exclude match in linear time without recursion (issue 13, C2).
          libre2-dev pkg-config
          # oneDNN's CMake config looks for OpenCL and stops the configure without it; apt-get only
          # recommends the package, and recommendations are not installed here.
          ocl-icd-opencl-dev)
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

# A configure that failed leaves a cache but no build files: configure again then.
if [ ! -f build/CMakeCache.txt ] || [ ! -f build/Makefile ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DNMKIT_WERROR=ON
fi
