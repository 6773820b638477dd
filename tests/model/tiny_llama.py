"""A tiny random llama model for the end-to-end tests: written as GGUF with the PyPI `gguf` package (a
byte-level GPT-2 vocabulary of 256 bytes, one merge no text uses and <|endoftext|>), or as a Hugging
Face folder (HF names, q/k rows in HF's rotate-half order, F32 safetensors written by hand here,
optionally sharded); and readers of both, independent of nmkit.
"""
import json
import os
import struct

import numpy as np

P = dict(n_vocab=258, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=84, n_ctx=128, rms_eps=1e-5)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def tensor_shapes(p=P, n_vocab=None):
    """GGUF name -> numpy shape (rows, K) of every tensor of a tied llama with the dimensions `p`."""
    d, hd = p["n_embd"], p["n_embd"] // p["n_head"]
    shapes = {"token_embd.weight": (n_vocab or p["n_vocab"], d), "output_norm.weight": (d,)}
    for b in range(p["n_layer"]):
        pre = f"blk.{b}."
        shapes[pre + "attn_norm.weight"] = (d,)
        shapes.update({pre + "attn_q.weight": (p["n_head"] * hd, d), pre + "attn_k.weight": (p["n_head_kv"] * hd, d),
                       pre + "attn_v.weight": (p["n_head_kv"] * hd, d), pre + "attn_output.weight": (d, p["n_head"] * hd),
                       pre + "ffn_gate.weight": (p["n_ff"], d), pre + "ffn_up.weight": (p["n_ff"], d),
                       pre + "ffn_down.weight": (d, p["n_ff"])})
        shapes[pre + "ffn_norm.weight"] = (d,)
    return shapes


def write_model(path, rng, edit=None, block_count=None, n_vocab=None, rms_eps=None, rope_base=10000.0, p=P,
                sparse_q4_0=False):
    """edit(tensors) may change the tensors (bad input); block_count, n_vocab (token_embd's rows and
    llama.vocab_size), rms_eps and rope_base override the metadata's; p gives the dimensions.
    sparse_q4_0: every matrix Q4_0 and all zeros, left as a hole in a sparse file (a model far larger
    in memory than on disk); returns no tensors then."""
    import gguf
    shapes = tensor_shapes(p, n_vocab)
    t = {}
    if not sparse_q4_0:
        for name, shape in shapes.items():
            t[name] = (rng.uniform(0.5, 1.5, shape) if len(shape) == 1 else
                       rng.normal(0, 1.0 if name == "token_embd.weight" else 1.0 / np.sqrt(shape[1]), shape))
        t = {k: v.astype(np.float32) for k, v in t.items()}
    if edit:
        edit(t)
    b2u = bytes_to_unicode()
    tokens = [b2u[i] for i in range(256)] + [b2u[0] + b2u[1], "<|endoftext|>"]
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny-test")
    w.add_context_length(p["n_ctx"])
    w.add_embedding_length(p["n_embd"])
    w.add_block_count(p["n_layer"] if block_count is None else block_count)
    w.add_feed_forward_length(p["n_ff"])
    w.add_head_count(p["n_head"])
    w.add_head_count_kv(p["n_head_kv"])
    w.add_layer_norm_rms_eps(p["rms_eps"] if rms_eps is None else rms_eps)
    w.add_rope_freq_base(rope_base)
    w.add_vocab_size(n_vocab or p["n_vocab"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([1] * 257 + [3])
    w.add_token_merges([b2u[0] + " " + b2u[1]])  # bytes 0 and 1: never in the text
    w.add_bos_token_id(257)
    w.add_eos_token_id(257)
    w.add_add_bos_token(False)
    if not sparse_q4_0:
        for name, value in t.items():
            w.add_tensor(name, value)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return t
    data = 0
    for name, shape in shapes.items():
        quantized = len(shape) == 2
        nbytes = shape[0] * shape[1] // 32 * 18 if quantized else shape[0] * 4
        w.add_tensor_info(name, shape, np.float32, nbytes,
                          raw_dtype=gguf.GGMLQuantizationType.Q4_0 if quantized else gguf.GGMLQuantizationType.F32)
        data += -(-nbytes // 32) * 32
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    infos_end = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(-(-infos_end // 32) * 32 + data)
    return None


def read_gguf(path):
    import gguf
    r = gguf.GGUFReader(path)
    tensors = {}
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]
        tensors[t.name] = np.array(t.data, dtype=np.float32).reshape(shape)
    keys = [f.name for f in r.fields.values() if not f.name.startswith("GGUF.")]
    return r, tensors, keys


HF_BLOCK = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
            "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
            "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
            "ffn_down": "mlp.down_proj"}


def to_hf(name, value):
    """GGUF name and rows -> HF name and rows (convert_hf_to_gguf.py's permute, inverted)."""
    top = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}
    if name in top:
        return top[name], value
    _, b, linear, _ = name.split(".")
    heads = {"attn_q": P["n_head"], "attn_k": P["n_head_kv"]}.get(linear)
    if heads:
        rows, K = value.shape
        hd = rows // heads
        # GGUF row h*hd + 2i + s holds HF row h*hd + s*hd/2 + i
        value = value.reshape(heads, hd // 2, 2, K).swapaxes(1, 2).reshape(rows, K)
    return f"model.layers.{b}.{HF_BLOCK[linear]}.weight", value


def write_hf(folder, src, shards=1):
    """The folder of `src` (GGUF names -> arrays), in `shards` safetensors files (with
    model.safetensors.index.json when more than one)."""
    os.makedirs(folder)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": P["n_vocab"],
           "hidden_size": P["n_embd"], "intermediate_size": P["n_ff"], "num_hidden_layers": P["n_layer"],
           "num_attention_heads": P["n_head"], "num_key_value_heads": P["n_head_kv"],
           "rms_norm_eps": P["rms_eps"], "rope_theta": 10000.0, "max_position_embeddings": P["n_ctx"],
           "tie_word_embeddings": True, "hidden_act": "silu"}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    hf = dict(to_hf(n, v) for n, v in src.items())
    names = list(hf)
    files = ["model.safetensors"] if shards == 1 else \
        [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    weight_map = {}
    for i, file in enumerate(files):
        header, blobs, off = {}, [], 0
        for name in names[i::shards]:
            raw = np.ascontiguousarray(hf[name], dtype="<f4").tobytes()
            header[name] = {"dtype": "F32", "shape": list(hf[name].shape), "data_offsets": [off, off + len(raw)]}
            blobs.append(raw)
            off += len(raw)
            weight_map[name] = file
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(folder, file), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    if shards > 1:
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return hf


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(info["shape"])
    return out
