#!/usr/bin/env python3
"""Converts a llama GGUF file to a Hugging Face checkpoint folder, independently of nmkit (the PyPI
gguf package reads and dequantizes; numpy un-permutes; safetensors written by hand here):
config.json, model-0000i-of-0000n.safetensors shards (F32) with model.safetensors.index.json (or a
single model.safetensors with --shards 1), and no tokenizer.json.

q/k rows are taken back from GGUF's rope-NORM order to HF's rotate-halves order: the inverse of
llama.cpp's convert_hf_to_gguf.py `permute` (docs/design.md section 11.1), i.e.
    hf = w.reshape(heads, hd // 2, 2, K).swapaxes(1, 2).reshape(w.shape)
with heads = n_head for attn_q and n_head_kv for attn_k.

Also writes a GGUF truncated to the same --layers (the original quantized blocks copied raw), so a
test can compare a small model in both layouts.

    gguf_to_hf.py MODEL.gguf OUT_DIR [--layers N] [--shards S] [--gguf-out SMALL.gguf]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import gguf

HF_BLOCK = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
HF_TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
          "output.weight": "lm_head.weight"}


def field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def hf_name(name):
    if name in HF_TOP:
        return HF_TOP[name]
    _, b, kind, _ = name.split(".")
    return f"model.layers.{b}.{HF_BLOCK[kind]}.weight"


def unpermute(w, heads):
    rows, k = w.shape
    return w.reshape(heads, rows // heads // 2, 2, k).swapaxes(1, 2).reshape(rows, k)


def write_safetensors(path, tensors):
    """tensors: list of (name, float32 array). Header padded with spaces to 8 bytes."""
    header, offset = {}, 0
    for name, a in tensors:
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, a in tensors:
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def kept(name, layers):
    return not name.startswith("blk.") or int(name.split(".")[1]) < layers


def convert(model, out_dir, layers=None, shards=2, gguf_out=None):
    r = gguf.GGUFReader(model)
    arch = field(r, "general.architecture")
    assert arch == "llama", arch
    n_layer = field(r, "llama.block_count")
    layers = n_layer if layers is None else min(layers, n_layer)
    n_head = field(r, "llama.attention.head_count")
    n_head_kv = field(r, "llama.attention.head_count_kv", n_head)
    names = [t.name for t in r.tensors if kept(t.name, layers)]
    tied = "output.weight" not in names
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": int(field(r, "llama.vocab_size", len(field(r, "tokenizer.ggml.tokens", [])))),
        "hidden_size": int(field(r, "llama.embedding_length")), "num_hidden_layers": int(layers),
        "num_attention_heads": int(n_head), "num_key_value_heads": int(n_head_kv),
        "intermediate_size": int(field(r, "llama.feed_forward_length")),
        "max_position_embeddings": int(field(r, "llama.context_length")),
        # float32 values written as the shortest decimal that reads back as the same float32.
        "rms_norm_eps": float(np.format_float_positional(np.float32(field(r, "llama.attention.layer_norm_rms_epsilon")), unique=True)),
        "rope_theta": float(field(r, "llama.rope.freq_base", 10000.0)),
        "tie_word_embeddings": tied, "hidden_act": "silu", "torch_dtype": "float32",
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    by_name = {t.name: t for t in r.tensors}
    hf = []
    for name in names:
        t = by_name[name]
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
        kind = name.split(".")[2] if name.startswith("blk.") else None
        if kind == "attn_q":
            w = unpermute(w, n_head)
        elif kind == "attn_k":
            w = unpermute(w, n_head_kv)
        hf.append((hf_name(name), w))
    if shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), hf)
    else:
        weight_map = {}
        per = (len(hf) + shards - 1) // shards
        for i in range(shards):
            part = hf[i * per:(i + 1) * per]
            file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            write_safetensors(os.path.join(out_dir, file), part)
            weight_map.update({n: file for n, _ in part})
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(a.nbytes for _, a in hf)}, "weight_map": weight_map}, f, indent=1)
    if gguf_out:
        w = gguf.GGUFWriter(gguf_out, arch=arch)
        for key, fld in r.fields.items():
            if key.startswith("GGUF.") or key == "general.architecture":
                continue
            value = layers if key == "llama.block_count" else fld.contents()
            sub = fld.types[-1] if fld.types[0] == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(key, value, fld.types[0], sub_type=sub)
        for name in names:
            t = by_name[name]
            w.add_tensor(name, t.data, raw_dtype=t.tensor_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    return config, names


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("out_dir")
    p.add_argument("--layers", type=int)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--gguf-out")
    a = p.parse_args()
    config, names = convert(a.model, a.out_dir, a.layers, a.shards, a.gguf_out)
    print(f"{a.out_dir}: {len(names)} tensors, {config['num_hidden_layers']} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
