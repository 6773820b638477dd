#!/usr/bin/env python3
"""Independent check of nmkit's llama forward pass (docs/design.md 11.2) against a numpy float64 forward.

Written from the design text only: a tiny random llama (GQA with n_head_kv < n_head, tied output,
sizes that leave N:M tail groups) is generated here and written as a GGUF file with the PyPI `gguf`
package's GGUFWriter (F32 tensors); numpy computes its logits on 64 tokens in float64; nmkit (tests/model/model_logits.cc) reads the same
file with its own GGUF reader, runs it and the logits are compared:
  - dense f32 and the 2:4-magnitude-pruned model (pruned here, by docs/design.md 2) against numpy, to the
    float32 bound below;
  - bf16 weights (which run with bf16 activations) against numpy on the bf16-rounded weights (nearest
    even), to the bound the rounding of each linear's input implies;
  - sparse24, nm (2:4 and 6:8), slid and int8 forms against nmkit's dense-masked f32 model, to the
    bound their rounding implies;
  - prefill-then-decode and the block-by-block calibration path against one full prefill.

Usage: independent_forward.py --tool PATH/TO/nmkit_model_logits [--seed N]
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

PARAMS = dict(n_vocab=320, n_embd=72, n_layer=2, n_head=4, n_head_kv=2, n_ff=100, n_ctx=256,
              rms_eps=1e-5, rope_base=10000.0)
N_TOKENS = 64


def random_model(rng, p):
    d, hd = p["n_embd"], p["n_embd"] // p["n_head"]
    t = {"token_embd.weight": rng.normal(0, 1.0, (p["n_vocab"], d)),
         "output_norm.weight": rng.uniform(0.5, 1.5, d)}
    for b in range(p["n_layer"]):
        pre = f"blk.{b}."
        t[pre + "attn_norm.weight"] = rng.uniform(0.5, 1.5, d)
        t[pre + "ffn_norm.weight"] = rng.uniform(0.5, 1.5, d)
        shapes = {"attn_q": (p["n_head"] * hd, d), "attn_k": (p["n_head_kv"] * hd, d),
                  "attn_v": (p["n_head_kv"] * hd, d), "attn_output": (d, p["n_head"] * hd),
                  "ffn_gate": (p["n_ff"], d), "ffn_up": (p["n_ff"], d), "ffn_down": (d, p["n_ff"])}
        for name, shape in shapes.items():
            # Scaled so that activations stay O(1) through the blocks (1/sqrt(K), times 2 for q/k so
            # that attention is not uniform).
            scale = (2.0 if name in ("attn_q", "attn_k") else 1.0) / np.sqrt(shape[1])
            t[pre + name + ".weight"] = rng.normal(0, scale, shape)
    return {k: v.astype(np.float32) for k, v in t.items()}


def write_gguf(path, p, tensors):
    import gguf
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(p["n_ctx"])
    w.add_embedding_length(p["n_embd"])
    w.add_block_count(p["n_layer"])
    w.add_feed_forward_length(p["n_ff"])
    w.add_head_count(p["n_head"])
    w.add_head_count_kv(p["n_head_kv"])
    w.add_layer_norm_rms_eps(p["rms_eps"])
    w.add_rope_freq_base(p["rope_base"])
    w.add_vocab_size(p["n_vocab"])
    for name, value in tensors.items():
        w.add_tensor(name, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_gguf(path):
    """The tensors as the `gguf` package reads them back: name -> float32 [rows, K]."""
    import gguf
    r = gguf.GGUFReader(path)
    out = {}
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]  # ne[0] is contiguous: numpy's last axis
        out[t.name] = np.array(t.data, dtype=np.float32).reshape(shape)
    return out


# ---------------------------------------------------------------------------------------------------
# The oracle: docs/design.md 11.2 in float64.

def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, positions, base):
    """x [n, heads, hd]: pairs (2i, 2i+1) turn by p * base^(-2i/hd) (rope NORM)."""
    hd = x.shape[-1]
    i = np.arange(hd // 2)
    theta = positions[:, None] * base ** (-2.0 * i / hd)  # [n, hd/2]
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


def forward(t, p, tokens, head_weight=None):
    f = {k: v.astype(np.float64) for k, v in t.items()}
    nh, nkv, d = p["n_head"], p["n_head_kv"], p["n_embd"]
    hd = d // nh
    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)
    x = f["token_embd.weight"][tokens]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for b in range(p["n_layer"]):
        w = lambda name: f[f"blk.{b}.{name}.weight"]
        xn = rmsnorm(x, w("attn_norm"), p["rms_eps"])
        q = rope((xn @ w("attn_q").T).reshape(n, nh, hd), pos, p["rope_base"])
        k = rope((xn @ w("attn_k").T).reshape(n, nkv, hd), pos, p["rope_base"])
        v = (xn @ w("attn_v").T).reshape(n, nkv, hd)
        att = np.empty((n, nh, hd))
        for h in range(nh):
            g = h // (nh // nkv)
            s = q[:, h, :] @ k[:, g, :].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            att[:, h, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, g, :]
        x = x + att.reshape(n, nh * hd) @ w("attn_output").T
        xn = rmsnorm(x, w("ffn_norm"), p["rms_eps"])
        gate, up = xn @ w("ffn_gate").T, xn @ w("ffn_up").T
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w("ffn_down").T
    head = f["token_embd.weight"] if head_weight is None else head_weight.astype(np.float64)
    xn = rmsnorm(x, f["output_norm.weight"], p["rms_eps"])
    forward.abs_sum = (np.abs(xn) @ np.abs(head).T).max()  # largest sum |w x| of a logit, for the bounds
    return xn @ head.T


def prune_magnitude(w, keep, group):
    """docs/design.md 2: keep the `keep` largest |w| of each group along K (ties: lower index; random
    normal weights have no equal magnitudes), tail groups padded."""
    rows, K = w.shape
    pad = (-K) % group
    wp = np.concatenate([w, np.zeros((rows, pad), w.dtype)], axis=1).reshape(rows, -1, group)
    order = np.argsort(-np.abs(wp), axis=2, kind="stable")
    keep_mask = np.zeros_like(wp, dtype=bool)
    np.put_along_axis(keep_mask, order[:, :, :keep], True, axis=2)
    out = np.where(keep_mask, wp, 0).reshape(rows, -1)[:, :K]
    return out.astype(w.dtype)


def round_bf16(w):
    u = w.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


BLOCK_LINEARS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def map_linears(t, fn):
    return {k: (fn(v) if any(f".{n}." in k for n in BLOCK_LINEARS) else v) for k, v in t.items()}


# ---------------------------------------------------------------------------------------------------

def f32_bound(p):
    """Max |nmkit - float64| allowed for an f32 forward pass. A float32 sum of K products errs by at
    most K*u (u = 2^-24; Higham's gamma_K) of sum |w x|; the exp of the softmax and SwiGLU adds below
    4u (model_kernels.h). The residual stream carries the errors of the 2*n_layer + 1 linears on the
    path to the logits additively and RMSNorm keeps their relative size, so a logit errs by at most
    (2*n_layer + 2) * K_max * u of the largest sum |w x| at the head (forward.abs_sum)."""
    u = 2.0 ** -24
    K_max = max(p["n_embd"], p["n_ff"])
    return (2 * p["n_layer"] + 2) * K_max * u * forward.abs_sum


def bf16_bound(p):
    """Max |nmkit - float64 on bf16 weights| for bf16 weights: every linear's input is rounded to bf16
    (nearest even, relative error at most 2^-9), so a linear's output moves by at most 2^-9 of sum
    |w x|; the 2*n_layer + 2 linears of the path add up as in f32_bound, on top of the f32 bound."""
    return (2 * p["n_layer"] + 2) * 2.0 ** -9 * forward.abs_sum + f32_bound(p)


def run(tool, model, tokens, out, *flags):
    cmd = [tool, model, ",".join(map(str, tokens)), out, *flags]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    kernel = r.stdout.strip().split("kernel ", 1)[-1]
    logits = np.fromfile(out, dtype="<f4").reshape(len(tokens), -1)
    assert np.isfinite(logits).all() and np.abs(logits).max() > 0, "logits unwritten or not finite"
    return logits, kernel


def check(label, got, ref, bound):
    err = np.abs(got.astype(np.float64) - ref).max()
    status = "ok" if err <= bound else "FAIL"
    print(f"{status:4} {label:42} max|diff| {err:.3e}  bound {bound:.3e}")
    return err <= bound


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    print(f"seed {args.seed}")
    rng = np.random.default_rng(args.seed)
    p = PARAMS
    t = random_model(rng, p)
    tokens = rng.integers(0, p["n_vocab"], N_TOKENS).tolist()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        gguf_path, out = (os.path.join(tmp, n) for n in ("tiny.gguf", "logits.bin"))
        write_gguf(gguf_path, p, t)
        back = read_gguf(gguf_path)  # the oracle reads the model the way any GGUF reader would
        assert back.keys() == t.keys() and all(np.array_equal(back[k], t[k]) for k in t)
        st_path = gguf_path  # nmkit reads it with its own GGUF reader (ModelSource)

        ref = forward(back, p, tokens)
        bound = f32_bound(p)
        got, kernel = run(args.tool, st_path, tokens, out)
        ok &= check(f"dense f32 vs numpy ({kernel})", got, ref, bound)
        for mode in ("decode", "blocks"):
            got_mode, _ = run(args.tool, st_path, tokens, out, "--mode", mode)
            ok &= check(f"{mode} vs numpy", got_mode, ref, bound)
            ok &= check(f"{mode} vs nmkit full prefill", got_mode, got.astype(np.float64), bound)

        bf16 = map_linears(back, round_bf16)
        ref_bf16 = forward(bf16, p, tokens, head_weight=round_bf16(back["token_embd.weight"]))
        b_bound = bf16_bound(p)
        got, kernel = run(args.tool, st_path, tokens, out, "--weights", "bf16")
        ok &= check(f"bf16 vs numpy on bf16 weights ({kernel})", got, ref_bf16, b_bound)
        if np.abs(got - ref_bf16).max() <= bound:
            print("FAIL bf16 equals numpy on unrounded activations to f32 precision: activations not bf16?")
            ok = False

        for pattern in ("2:4", "6:8"):
            keep, group = map(int, pattern.split(":"))
            pruned = map_linears(back, lambda w: prune_magnitude(w, keep, group))
            ref_p = forward(pruned, p, tokens)
            saved = os.path.join(tmp, f"pruned{keep}_{group}.gguf")
            masked, kernel = run(args.tool, st_path, tokens, out, "--pattern", pattern, "--save", saved)
            ok &= check(f"{pattern} dense-masked f32 vs numpy", masked, ref_p, bound)
            # The saved model: gguf's reader finds the numpy-pruned weights bit for bit, in GGUF order,
            # with the metadata kept; nmkit runs it to the same logits.
            back_saved = read_gguf(saved)
            same = (list(back_saved) == list(t) and
                    all(np.array_equal(back_saved[k], pruned[k]) for k in t))
            import gguf
            fields = gguf.GGUFReader(saved).fields
            same &= fields["llama.block_count"].contents() == p["n_layer"]
            print(f"{'ok' if same else 'FAIL':4} {pattern} saved GGUF: weights equal numpy's pruning, metadata kept")
            ok &= same
            from_saved, _ = run(args.tool, saved, tokens, out)
            ok &= check(f"{pattern} saved GGUF run vs pruned on load", from_saved, masked.astype(np.float64), 0.0)
            forms = [("nm", "f32"), ("nm", "bf16"), ("slid", "int8")]
            if pattern == "2:4":
                forms += [("sparse24", "f32"), ("sparse24", "bf16"), ("sparse24", "int8"), ("dense", "int8")]
            masked64 = masked.astype(np.float64)
            for fmt, weights in forms:
                got, kernel = run(args.tool, st_path, tokens, out, "--pattern", pattern, "--format", fmt,
                                  "--weights", weights)
                expect_kernel = {"sparse24": "sparse24", "nm": "nm", "slid": "slid", "dense": "dense"}[fmt]
                if expect_kernel not in kernel:
                    print(f"FAIL {pattern} {fmt} {weights}: kernel '{kernel}' is not a {expect_kernel} kernel")
                    ok = False
                if weights == "f32":
                    # Same products, other summation order: the f32 bound.
                    ok &= check(f"{pattern} {fmt} f32 vs dense-masked ({kernel})", got, masked64, bound)
                elif weights == "bf16":
                    ref_b = forward(map_linears(pruned, round_bf16), p, tokens,
                                    head_weight=round_bf16(back["token_embd.weight"]))
                    ok &= check(f"{pattern} {fmt} bf16 vs numpy bf16 ({kernel})", got, ref_b, bf16_bound(p))
                else:
                    # int8: each weight moves by at most half a step, max|w_row|/254, and each
                    # activation by max|x_token|/254 (docs/design.md 6): a linear's output moves by at most
                    # 2/254 of sum |w||x|; the 2*n_layer + 2 linears of the path add up (as in
                    # f32_bound).
                    forward(pruned, p, tokens)
                    int8_bound = (2 * p["n_layer"] + 2) * (2 / 254) * forward.abs_sum
                    ok &= check(f"{pattern} {fmt} int8 vs dense-masked ({kernel})", got, masked64, int8_bound)
                    # ... and it is really quantized: not within the f32 bound.
                    if np.abs(got - masked64).max() <= bound:
                        print(f"FAIL {pattern} {fmt} int8 equals f32 to f32 precision: not quantized?")
                        ok = False
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
