#!/usr/bin/env python3
"""Independent check of nmkit's model families (docs/design.md 11.8) against a numpy float64 forward.

For each family (qwen2, qwen3, llama with Llama 3.x's rope scaling, mistral with a sliding window,
gemma3) a tiny random model is made here in its Hugging Face form (transformers' conventions:
rotate-halves rope on unpermuted q/k rows, Gemma norm weights w standing for 1 + w) and written twice:
as a Hugging Face folder (config.json + model.safetensors, written by hand) and as a GGUF file made
the way llama.cpp's convert_hf_to_gguf.py makes it (the PyPI `gguf` package's GGUFWriter; q/k rows
permuted for llama and mistral, 1 added to Gemma's norms, llama3 rope factors as rope_freqs.weight,
the family's keys). numpy runs the Hugging Face form (written from the design text and transformers'
modelling code, not from nmkit's); nmkit (tests/model/model_logits.cc) runs both files:
  - the GGUF: one prefill, prefill-then-decode and the block-by-block calibration path; the HF folder:
    one prefill; all against numpy to the float32 bound of independent_forward.py;
  - the model pruned 2:4 (magnitude) on load, against numpy on weights pruned here; saved as GGUF
    (its keys kept) and as a Hugging Face folder (config.json with the family's model_type, the
    weights numpy pruned in HF form), both of which nmkit reads back to the same logits.
The 64 tokens are longer than the 16-token windows, so local layers really cut their attention.

With --nmkit, also the bad inputs of issue 29 through `nmkit eval` (bad_inputs).

Usage: family_forward.py --tool PATH/TO/nmkit_model_logits [--nmkit PATH/TO/nmkit] [--seed N] [--family NAME]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model_source"))
from independent_forward import check, prune_magnitude, read_gguf, run  # noqa: E402
from gguf_to_hf import write_safetensors  # noqa: E402
from smollm2_hf_write import read_safetensors  # noqa: E402

N_TOKENS = 64
BASE = dict(n_vocab=320, n_embd=72, n_layer=2, n_head=4, n_head_kv=2, n_ff=100, n_ctx=256, rms_eps=1e-5,
            rope_base=10000.0)
FAMILIES = {
    "qwen2": dict(BASE, arch="qwen2", model_type="qwen2", neox=True, bias=True),
    "qwen3": dict(BASE, arch="qwen3", model_type="qwen3", neox=True, qk_norm=True, head_dim=24, tied=False),
    "llama3": dict(BASE, arch="llama", model_type="llama", llama3=dict(factor=8.0, low=1.0, high=32.0, ctx=1024),
                   rope_base=500000.0),
    "mistral": dict(BASE, arch="llama", model_type="mistral", window=16, local=[1, 1]),
    "gemma3": dict(BASE, arch="gemma3", model_type="gemma3_text", neox=True, qk_norm=True, gemma=True,
                   head_dim=32, n_layer=3, window=16, local=[1, 0, 1], rope_base=1000000.0, rope_local=10000.0,
                   rms_eps=1e-6),
}
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def head_dim(p):
    return p.get("head_dim", p["n_embd"] // p["n_head"])


def random_model(rng, p):
    """Hugging Face names and forms, float32."""
    d, hd, ff = p["n_embd"], head_dim(p), p["n_ff"]
    nq, nkv = p["n_head"] * hd, p["n_head_kv"] * hd
    # Gemma stores w of (1 + w): near 0 there, near 1 elsewhere.
    norm = (lambda n: rng.uniform(-0.5, 0.5, n)) if p.get("gemma") else (lambda n: rng.uniform(0.5, 1.5, n))
    t = {"model.embed_tokens.weight": rng.normal(0, 1.0 / (np.sqrt(d) if p.get("gemma") else 1.0), (p["n_vocab"], d)),
         "model.norm.weight": norm(d)}
    if not p.get("tied", True):
        t["lm_head.weight"] = rng.normal(0, 1.0 / np.sqrt(d), (p["n_vocab"], d))
    for b in range(p["n_layer"]):
        pre = f"model.layers.{b}."
        shapes = {"self_attn.q_proj": (nq, d), "self_attn.k_proj": (nkv, d), "self_attn.v_proj": (nkv, d),
                  "self_attn.o_proj": (d, nq), "mlp.gate_proj": (ff, d), "mlp.up_proj": (ff, d),
                  "mlp.down_proj": (d, ff)}
        for name, shape in shapes.items():
            scale = (2.0 if name in ("self_attn.q_proj", "self_attn.k_proj") else 1.0) / np.sqrt(shape[1])
            t[pre + name + ".weight"] = rng.normal(0, scale, shape)
        t[pre + "input_layernorm.weight"] = norm(d)
        if p.get("gemma"):
            for n in ("post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
                t[pre + n + ".weight"] = norm(d)
        else:
            t[pre + "post_attention_layernorm.weight"] = norm(d)
        if p.get("qk_norm"):
            t[pre + "self_attn.q_norm.weight"] = norm(hd)
            t[pre + "self_attn.k_norm.weight"] = norm(hd)
        if p.get("bias"):
            for n, rows in (("q_proj", nq), ("k_proj", nkv), ("v_proj", nkv)):
                t[pre + f"self_attn.{n}.bias"] = rng.normal(0, 0.5, rows)
    return {k: v.astype(np.float32) for k, v in t.items()}


def llama3_factors(p):
    """convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors (float32 frequencies)."""
    s, hd = p["llama3"], head_dim(p)
    freqs = 1.0 / (np.float32(p["rope_base"]) ** (np.arange(0, hd, 2, dtype=np.float32) / np.float32(hd)))
    out = []
    for f in freqs.astype(np.float32):
        wavelen = 2 * np.pi / float(f)
        if wavelen < s["ctx"] / s["high"]:
            out.append(1.0)
        elif wavelen > s["ctx"] / s["low"]:
            out.append(s["factor"])
        else:
            smooth = (s["ctx"] / wavelen - s["low"]) / (s["high"] - s["low"])
            out.append(1 / ((1 - smooth) / s["factor"] + smooth))
    return np.array(out, dtype=np.float32)


# ---------------------------------------------------------------------------------------------------
# The oracle: the Hugging Face form in float64.

def rmsnorm(x, w, eps, gemma):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * ((1.0 + w) if gemma else w)


def rope_halves(x, pos, inv_freq):
    """transformers' apply_rotary_pos_emb: x [n, heads, hd], q*cos + rotate_half(q)*sin."""
    theta = pos[:, None] * inv_freq[None, :]
    c = np.concatenate([np.cos(theta)] * 2, axis=1)[:, None, :]
    s = np.concatenate([np.sin(theta)] * 2, axis=1)[:, None, :]
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * c + rotated * s


def gelu_tanh(g):
    return 0.5 * g * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (g + 0.044715 * g ** 3)))


def forward(t, p, tokens):
    f = {k: v.astype(np.float64) for k, v in t.items()}
    nh, nkv, d, hd = p["n_head"], p["n_head_kv"], p["n_embd"], head_dim(p)
    gemma, eps = bool(p.get("gemma")), p["rms_eps"]
    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)
    x = f["model.embed_tokens.weight"][tokens] * (np.sqrt(d) if gemma else 1.0)
    inv_freq = p["rope_base"] ** (-np.arange(0, hd, 2) / hd)
    if "llama3" in p:
        inv_freq = inv_freq / llama3_factors(p).astype(np.float64)
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    for b in range(p["n_layer"]):
        w = lambda name: f[f"model.layers.{b}.{name}"]
        local = bool(p.get("local", [0] * p["n_layer"])[b])
        mask = np.where((j <= i) & (~local | (j > i - p.get("window", n))), 0.0, -np.inf)
        freq = p["rope_local"] ** (-np.arange(0, hd, 2) / hd) if (local and "rope_local" in p) else inv_freq
        h = rmsnorm(x, w("input_layernorm.weight"), eps, gemma)
        proj = {}
        for name, heads in (("q_proj", nh), ("k_proj", nkv), ("v_proj", nkv)):
            y = h @ w(f"self_attn.{name}.weight").T
            if p.get("bias"):
                y = y + w(f"self_attn.{name}.bias")
            proj[name] = y.reshape(n, heads, hd)
        q, k, v = proj["q_proj"], proj["k_proj"], proj["v_proj"]
        if p.get("qk_norm"):
            q = rmsnorm(q, w("self_attn.q_norm.weight"), eps, gemma)
            k = rmsnorm(k, w("self_attn.k_norm.weight"), eps, gemma)
        q, k = rope_halves(q, pos, freq), rope_halves(k, pos, freq)
        att = np.empty((n, nh, hd))
        for head in range(nh):
            g = head // (nh // nkv)
            s = q[:, head, :] @ k[:, g, :].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            att[:, head, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, g, :]
        o = att.reshape(n, nh * hd) @ w("self_attn.o_proj.weight").T
        if gemma:
            o = rmsnorm(o, w("post_attention_layernorm.weight"), eps, gemma)
        x = x + o
        h = rmsnorm(x, w("pre_feedforward_layernorm.weight" if gemma else "post_attention_layernorm.weight"), eps, gemma)
        gate, up = h @ w("mlp.gate_proj.weight").T, h @ w("mlp.up_proj.weight").T
        act = gelu_tanh(gate) if gemma else gate / (1.0 + np.exp(-gate))
        y = (act * up) @ w("mlp.down_proj.weight").T
        if gemma:
            y = rmsnorm(y, w("post_feedforward_layernorm.weight"), eps, gemma)
        x = x + y
    head = f.get("lm_head.weight", f["model.embed_tokens.weight"])
    xn = rmsnorm(x, f["model.norm.weight"], eps, gemma)
    forward.abs_sum = (np.abs(xn) @ np.abs(head).T).max()
    return xn @ head.T


def f32_bound(p):
    """independent_forward.py's bound (its reasoning holds for every family: each linear on the path to
    the logits adds its K * u of sum |w x|, norms keep relative sizes), with the head size among K."""
    u = 2.0 ** -24
    K_max = max(p["n_embd"], p["n_ff"], p["n_head"] * head_dim(p))
    return (2 * p["n_layer"] + 2) * K_max * u * forward.abs_sum


# ---------------------------------------------------------------------------------------------------
# The two files.

def permute(w, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute (rope NORM families)."""
    rows = w.shape[0]
    return w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


GGUF_BLOCK = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
              "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
              "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
              "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
              "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
              "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
              "self_attn.v_proj.bias": "attn_v.bias", "pre_feedforward_layernorm.weight": "ffn_norm.weight",
              "post_feedforward_layernorm.weight": "post_ffw_norm.weight"}


def gguf_tensors(t, p):
    out = {}
    if "llama3" in p:
        out["rope_freqs.weight"] = llama3_factors(p)
    for name, value in t.items():
        if name.startswith("model.layers."):
            _, _, b, rest = name.split(".", 3)
            if rest == "post_attention_layernorm.weight":
                gg = "post_attention_norm.weight" if p.get("gemma") else "ffn_norm.weight"
            else:
                gg = GGUF_BLOCK[rest]
            gname = f"blk.{b}.{gg}"
        else:
            gname = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                     "lm_head.weight": "output.weight"}[name]
        if not p.get("neox") and gname.endswith(("attn_q.weight", "attn_k.weight")):
            value = permute(value, p["n_head"] if "attn_q" in gname else p["n_head_kv"])
        if p.get("gemma") and gname.endswith("norm.weight"):
            value = value + np.float32(1.0)
        out[gname] = value.astype(np.float32)
    return out


def write_gguf(path, p, tensors, skip_key=None):
    import gguf
    w = gguf.GGUFWriter(path, p["arch"])
    if skip_key:  # a required key left out (bad input)
        real = w.add_key_value
        w.add_key_value = lambda key, *a, **k: None if key.endswith(skip_key) else real(key, *a, **k)
    w.add_context_length(p["n_ctx"])
    w.add_embedding_length(p["n_embd"])
    w.add_block_count(p["n_layer"])
    w.add_feed_forward_length(p["n_ff"])
    w.add_head_count(p["n_head"])
    w.add_head_count_kv(p["n_head_kv"])
    w.add_layer_norm_rms_eps(p["rms_eps"])
    w.add_rope_freq_base(p["rope_base"])
    if "head_dim" in p:
        w.add_key_length(p["head_dim"])
        w.add_value_length(p["head_dim"])
    if p.get("gemma"):
        w.add_sliding_window(p["window"])
        w.add_sliding_window_pattern(2)  # layers 0 and 2 local, 1 global (llama.cpp's set_swa_pattern)
        w.add_rope_freq_base_swa(p["rope_local"])
    for name, value in tensors.items():
        w.add_tensor(name, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_hf(folder, p, t):
    os.makedirs(folder)
    hd = head_dim(p)
    c = {"model_type": p["model_type"], "vocab_size": p["n_vocab"], "hidden_size": p["n_embd"],
         "intermediate_size": p["n_ff"], "num_hidden_layers": p["n_layer"], "num_attention_heads": p["n_head"],
         "num_key_value_heads": p["n_head_kv"], "head_dim": hd, "max_position_embeddings": p["n_ctx"],
         "rms_norm_eps": p["rms_eps"], "rope_theta": p["rope_base"], "tie_word_embeddings": p.get("tied", True)}
    if "llama3" in p:
        s = p["llama3"]
        c["rope_scaling"] = {"rope_type": "llama3", "factor": s["factor"], "low_freq_factor": s["low"],
                             "high_freq_factor": s["high"], "original_max_position_embeddings": s["ctx"]}
    if p["model_type"] == "mistral":
        c["sliding_window"] = p["window"]
    if p.get("gemma"):
        c.update(hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=hd, sliding_window=p["window"],
                 layer_types=["sliding_attention" if x else "full_attention" for x in p["local"]],
                 rope_local_base_freq=p["rope_local"])
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(c, f)
    write_safetensors(os.path.join(folder, "model.safetensors"), list(t.items()))


def check_family(tool, name, p, rng, tmp):
    """Mistral's GGUF is a llama file, which has no window (llama.cpp's converter writes none and llama.cpp
    runs none): its GGUF runs are checked against numpy without one, and the pruned model is made from
    the Hugging Face folder (so its saved folder keeps model_type mistral)."""
    ok = True
    t = random_model(rng, p)
    tokens = rng.integers(0, p["n_vocab"], N_TOKENS).tolist()
    gguf_path, hf_dir, out = (os.path.join(tmp, f"{name}{s}") for s in (".gguf", "_hf", ".bin"))
    write_gguf(gguf_path, p, gguf_tensors(t, p))
    write_hf(hf_dir, p, t)
    mistral = p["model_type"] == "mistral"
    p_gguf = {k: v for k, v in p.items() if k not in ("window", "local")} if mistral else p
    ref, ref_gguf = forward(t, p, tokens), forward(t, p_gguf, tokens)
    bound = f32_bound(p)
    got, kernel = run(tool, gguf_path, tokens, out)
    ok &= check(f"{name} GGUF f32 vs numpy", got, ref_gguf, bound)
    for mode in ("decode", "blocks"):
        got_mode, _ = run(tool, gguf_path, tokens, out, "--mode", mode)
        ok &= check(f"{name} GGUF {mode} vs numpy", got_mode, ref_gguf, bound)
    got_hf, _ = run(tool, hf_dir, tokens, out)
    ok &= check(f"{name} HF folder f32 vs numpy", got_hf, ref, bound)
    if mistral and np.abs(got_hf - got).max() <= bound:
        print(f"FAIL {name}: the window changes nothing (tokens within it?)")
        ok = False

    pruned = {k: (prune_magnitude(v, 2, 4) if any(f".{n}.weight" in k for n in LINEARS) else v) for k, v in t.items()}
    ref_p = forward(pruned, p, tokens)
    saved, saved_hf = os.path.join(tmp, f"{name}_24.gguf"), os.path.join(tmp, f"{name}_24_hf")
    masked, _ = run(tool, hf_dir if mistral else gguf_path, tokens, out, "--pattern", "2:4", "--save", saved,
                    "--save-hf", saved_hf)
    ok &= check(f"{name} 2:4 dense-masked vs numpy", masked, ref_p, bound)
    import gguf
    fields = gguf.GGUFReader(saved).fields
    same = (fields["general.architecture"].contents() == p["arch"] and
            fields[f"{p['arch']}.block_count"].contents() == p["n_layer"])
    back = read_gguf(saved)
    expect = gguf_tensors(pruned, p)
    same &= sorted(back) == sorted(expect) and all(np.array_equal(back[k], expect[k]) for k in expect)
    print(f"{'ok' if same else 'FAIL':4} {name} 2:4 saved GGUF: its keys, numpy's pruned weights")
    ok &= same
    with open(os.path.join(saved_hf, "config.json")) as f:
        config = json.load(f)
    _, _, hf_back = read_safetensors(os.path.join(saved_hf, "model.safetensors"))
    if p.get("gemma"):  # GGUF holds float32(w + 1); the folder gets that less 1
        pruned = {k: ((v + np.float32(1)) - np.float32(1)) if k.endswith("norm.weight") else v for k, v in pruned.items()}
    same = config["model_type"] == p["model_type"] and sorted(hf_back) == sorted(pruned)
    same &= all(np.array_equal(hf_back[k], pruned[k]) for k in pruned if k in hf_back)
    print(f"{'ok' if same else 'FAIL':4} {name} 2:4 saved HF folder: model_type {config['model_type']}, numpy's pruned weights")
    ok &= same
    # Bit for bit, but: llama3 rope factors recomputed from the written config.json are nmkit's float32
    # powers where the GGUF holds numpy's (an ulp apart), and a Mistral GGUF runs without the window.
    for label, path in (("GGUF", saved), ("HF folder", saved_hf)):
        got_back, _ = run(tool, path, tokens, out)
        if mistral and label == "GGUF":
            ok &= check(f"{name} 2:4 saved {label} run vs numpy", got_back, forward(pruned, p_gguf, tokens), bound)
            continue
        tol = bound if "llama3" in p and label == "HF folder" else 0.0
        ok &= check(f"{name} 2:4 saved {label} run vs pruned on load", got_back, masked.astype(np.float64), tol)
    return ok


def expect_error(nmkit, label, model, text, *needles):
    """`nmkit eval` on a bad model: exit 1, one line on stderr naming the file and the value."""
    r = subprocess.run([nmkit, "eval", model, "--text", text], capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    good = r.returncode == 1 and len(lines) == 1 and all(n in lines[0] for n in needles)
    print(f"{'ok' if good else 'FAIL':4} {label}: exit {r.returncode}: {' | '.join(lines)}")
    return good


def bad_inputs(nmkit, rng, tmp):
    """Issue 29's bad input: an architecture nmkit does not run (named, with the list of those it runs),
    a family's required key missing, a sliding window larger than the context, biases of the wrong size."""
    ok = True
    text = os.path.join(tmp, "text.txt")
    with open(text, "w") as f:
        f.write("A few words of text. " * 200)
    p = dict(FAMILIES["gemma3"])
    t = gguf_tensors(random_model(rng, p), p)
    path = os.path.join(tmp, "phi3.gguf")
    write_gguf(path, dict(p, arch="phi3"), t)
    ok &= expect_error(nmkit, "unknown architecture", path, text, path, "'phi3'", "llama, qwen2, qwen3, gemma3")
    path = os.path.join(tmp, "no_eps.gguf")
    write_gguf(path, p, t, skip_key="layer_norm_rms_epsilon")
    ok &= expect_error(nmkit, "required key missing", path, text, path, "gemma3.attention.layer_norm_rms_epsilon")
    path = os.path.join(tmp, "window.gguf")
    write_gguf(path, dict(p, window=1024), t)
    ok &= expect_error(nmkit, "sliding window above the context", path, text, path, "sliding_window = 1024", "256")
    q = FAMILIES["qwen2"]
    t = gguf_tensors(random_model(rng, q), q)
    t["blk.1.attn_k.bias"] = t["blk.1.attn_k.bias"][:-2]
    path = os.path.join(tmp, "bias.gguf")
    write_gguf(path, q, t)
    ok &= expect_error(nmkit, "bias of the wrong size", path, text, path, "blk.1.attn_k.bias", "[34]", "[36]")
    folder = os.path.join(tmp, "gemma3_multimodal")
    write_hf(folder, dict(p, model_type="gemma3"), random_model(rng, p))
    ok &= expect_error(nmkit, "unknown model_type", folder, text, "config.json", "'gemma3'", "gemma3_text")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--seed", type=int, default=2029)
    ap.add_argument("--family", choices=sorted(FAMILIES), action="append")
    ap.add_argument("--nmkit", help="the CLI, for the bad inputs")
    args = ap.parse_args()
    print(f"seed {args.seed}")
    rng = np.random.default_rng(args.seed)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.family or FAMILIES:
            ok &= check_family(args.tool, name, FAMILIES[name], rng, tmp)
        if args.nmkit:
            ok &= bad_inputs(args.nmkit, rng, tmp)
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
