#!/usr/bin/env bash
# Builds llama.cpp, the CPU engine nmkit's model speed and perplexity are compared with (docs/data.md,
# docs/design.md section 13). The source is the copy vendored in the PyPI sdist of llama-cpp-python
# 0.3.36 (llama.cpp commit 0c1e57098), fetched with pip by package name and checked by sha256, then
# unpacked and built into the git-ignored .cache/llamacpp/. Not part of `make test`: it takes about
# 15 minutes of both cores. Idempotent: skips what is already built. Prints the bin directory.
#
# Built: llama-bench, llama-perplexity, llama-quantize, llama-tokenize (no llama-cli: in this version
# it needs the server sources and an HTTP stack). Release, GGML_NATIVE (this CPU's ISA), CPU only,
# no CUDA, no curl/OpenSSL, static libraries, -j2 (the machine has 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.3.36
sdist_sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
root=.cache/llamacpp
src=$root/llama_cpp_python-$version/vendor/llama.cpp
build=$root/build
bin=$build/bin
tools=(llama-bench llama-perplexity llama-quantize llama-tokenize)

all_built() {
  for t in "${tools[@]}"; do [ -x "$bin/$t" ] || return 1; done
}

if ! all_built; then
  mkdir -p "$root"
  sdist=$root/llama_cpp_python-$version.tar.gz
  if [ ! -f "$sdist" ]; then
    echo "build_llamacpp: downloading llama-cpp-python $version (sdist) with pip" >&2
    python3 -m pip download --quiet --no-binary :all: --no-deps --dest "$root" \
      "llama-cpp-python==$version" >&2
  fi
  echo "$sdist_sha256  $sdist" | sha256sum --check --quiet - ||
    { echo "build_llamacpp: $sdist: sha256 differs from $sdist_sha256" >&2; exit 1; }
  if [ ! -f "$src/CMakeLists.txt" ]; then
    tar -xzf "$sdist" -C "$root"
  fi
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache
                                            -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
      -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON \
      -DBUILD_SHARED_LIBS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
      -DLLAMA_BUILD_COMMIT=0c1e57098 -DLLAMA_BUILD_NUMBER=0 >&2
  fi
  cmake --build "$build" -j2 --target "${tools[@]}" >&2
  all_built || { echo "build_llamacpp: build finished without all of ${tools[*]}" >&2; exit 1; }
fi
echo "$bin"
