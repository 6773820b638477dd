#!/usr/bin/env python3
"""Random-weight llama GGUFs of named shapes, for nmkit's scale benchmarks and memory test (issue 25).

    scripts/make_scale_model.py SHAPE [--out DIR] [--tokenizer SMOLLM2.gguf] [--seed N] [--quantize BIN]

SHAPE is one of the names below. The file DIR/<shape>.BF16.gguf is a llama model of that shape with
random BF16 weights (normal, std 0.02; norms 1) and SmolLM2's tokenizer (vocabulary 49152, read from
its GGUF with the PyPI `gguf` package), so nmkit and llama.cpp both load and tokenize it. With
--quantize (llama.cpp's llama-quantize), DIR/<shape>.Q8_0.gguf is written from it too (and
<shape>.F32.gguf for shapes below 2B parameters). Perplexity of such a model means nothing; its speed,
memory and load time are real. Idempotent: an existing output is kept. Prints the BF16 path.

Weights come from one pool of 2^24 random bf16 values, each tensor read from it at a random offset
(wrapping): generating 7.2 billion normal values takes minutes, a pool takes a second, and no
measurement here depends on the values beyond their being finite and not all equal.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf

# hidden, blocks, ffn, heads, kv heads: Llama-3.2-1B-like and Llama-3-8B-like with SmolLM2's vocabulary
# (issue 25), and small ones for tests.
SHAPES = {
    "tiny": dict(n_embd=64, n_layer=2, n_ff=256, n_head=4, n_head_kv=2),
    "test": dict(n_embd=1024, n_layer=4, n_ff=4096, n_head=16, n_head_kv=4),
    "1b": dict(n_embd=2048, n_layer=16, n_ff=8192, n_head=32, n_head_kv=8),
    "8b": dict(n_embd=4096, n_layer=32, n_ff=14336, n_head=32, n_head_kv=8),
}
N_VOCAB = 49152
POOL = 1 << 24

TOKENIZER_KEYS = [
    "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_space_prefix",
]


def tensor_shapes(s):
    """GGUF names and nmkit shapes [rows, K] in llama.cpp's order (token_embd, blocks, output_norm)."""
    d, ff, hd = s["n_embd"], s["n_ff"], s["n_embd"] // s["n_head"]
    out = [("token_embd.weight", (N_VOCAB, d))]
    for b in range(s["n_layer"]):
        p = f"blk.{b}."
        out += [(p + "attn_norm.weight", (d,)), (p + "attn_q.weight", (s["n_head"] * hd, d)),
                (p + "attn_k.weight", (s["n_head_kv"] * hd, d)), (p + "attn_v.weight", (s["n_head_kv"] * hd, d)),
                (p + "attn_output.weight", (d, s["n_head"] * hd)), (p + "ffn_norm.weight", (d,)),
                (p + "ffn_gate.weight", (ff, d)), (p + "ffn_up.weight", (ff, d)), (p + "ffn_down.weight", (d, ff))]
    out.append(("output_norm.weight", (d,)))
    return out


def copy_tokenizer(writer, path):
    reader = gguf.GGUFReader(path)
    for key in TOKENIZER_KEYS:
        field = reader.fields.get(key)
        if field is None:
            continue
        value = field.contents()
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(key, value)
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_string(key, value)
        elif kind == gguf.GGUFValueType.BOOL:
            writer.add_bool(key, value)
        else:
            writer.add_uint32(key, int(value))


def write_bf16(path, name, s, tokenizer, seed):
    rng = np.random.default_rng(seed)
    pool32 = rng.standard_normal(POOL, dtype=np.float32) * np.float32(0.02)
    pool = (pool32.view(np.uint32) >> 16).astype(np.uint16)  # bf16 by truncation: any finite values do
    pool = np.concatenate([pool, pool])  # a slice of up to POOL values at any offset below POOL

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name(f"nmkit scale model {name} (random weights)")
    writer.add_block_count(s["n_layer"])
    writer.add_context_length(4096)
    writer.add_embedding_length(s["n_embd"])
    writer.add_feed_forward_length(s["n_ff"])
    writer.add_head_count(s["n_head"])
    writer.add_head_count_kv(s["n_head_kv"])
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(N_VOCAB)
    writer.add_rope_dimension_count(s["n_embd"] // s["n_head"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    copy_tokenizer(writer, tokenizer)
    shapes = tensor_shapes(s)
    for tname, shape in shapes:
        n = int(np.prod(shape))
        # Norms stay F32 (as llama.cpp's converter writes them).
        if len(shape) == 1:
            writer.add_tensor_info(tname, shape, np.dtype(np.float32), n * 4)
        else:
            writer.add_tensor_info(tname, shape, np.dtype(np.uint16), n * 2,
                                   raw_dtype=gguf.GGMLQuantizationType.BF16)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tname, shape in shapes:
        n = int(np.prod(shape))
        if len(shape) == 1:
            writer.write_tensor_data(np.ones(n, dtype=np.float32))
            continue
        parts = []
        left = n
        while left > 0:
            take = min(left, POOL)
            start = int(rng.integers(0, POOL))
            parts.append(pool[start:start + take])
            left -= take
        data = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
        writer.write_tensor_data(data)
        del data, parts
    writer.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("--out", default=".cache/models/scale")
    ap.add_argument("--tokenizer", default=".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--quantize", help="llama.cpp's llama-quantize: also write Q8_0 (and F32 below 2B)")
    args = ap.parse_args()
    s = SHAPES[args.shape]
    os.makedirs(args.out, exist_ok=True)
    bf16 = os.path.join(args.out, f"{args.shape}.BF16.gguf")
    if not os.path.exists(bf16):
        if not os.path.exists(args.tokenizer):
            sys.exit(f"make_scale_model: {args.tokenizer}: no such file (scripts/fetch_model.sh fetches it)")
        fd, tmp = tempfile.mkstemp(prefix=f".{args.shape}.", suffix=".gguf", dir=args.out)
        os.close(fd)
        try:
            write_bf16(tmp, args.shape, s, args.tokenizer, args.seed)
            os.chmod(tmp, 0o644)
            os.replace(tmp, bf16)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    if args.quantize:
        params = sum(int(np.prod(shape)) for _, shape in tensor_shapes(s))
        types = ["Q8_0"] + (["F32"] if params < 2_000_000_000 else [])
        for t in types:
            out = os.path.join(args.out, f"{args.shape}.{t}.gguf")
            if os.path.exists(out):
                continue
            tmp = out + ".tmp"
            subprocess.run([args.quantize, bf16, tmp, t], check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            os.replace(tmp, out)
    print(bf16)


if __name__ == "__main__":
    main()
