#!/usr/bin/env python3
"""nmkit's forward pass on the real SmolLM2-135M-Instruct (scripts/fetch_model.sh) against the
independent numpy float64 forward of independent_forward.py, reading the file with the PyPI `gguf`
package (gguf.quants.dequantize), on 64 tokens:
  - dense f32 and the 2:4 magnitude-pruned model (pruned in numpy) against numpy;
  - the same model as a Hugging Face folder (tests/model_source/gguf_to_hf.py, q/k rows un-permuted
    to HF's rotate-halves order) against the GGUF, cut to its first 4 blocks: equal logits.
Prints "SKIP: reason" and exits 0 when the model cannot be fetched.

Usage: smollm2_forward.py --tool PATH/TO/nmkit_model_logits
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "model_source"))
import independent_forward as oracle  # noqa: E402
import gguf_to_hf  # noqa: E402


def read_model(path):
    r = gguf.GGUFReader(path)
    get = lambda key, default=None: r.fields[key].contents() if key in r.fields else default
    t = {}
    for ti in r.tensors:
        shape = [int(x) for x in reversed(ti.shape.tolist())]
        t[ti.name] = gguf.quants.dequantize(ti.data, ti.tensor_type).astype(np.float32).reshape(shape)
    p = dict(n_vocab=t["token_embd.weight"].shape[0], n_embd=get("llama.embedding_length"),
             n_layer=get("llama.block_count"), n_head=get("llama.attention.head_count"),
             n_head_kv=get("llama.attention.head_count_kv"), n_ff=get("llama.feed_forward_length"),
             rms_eps=get("llama.attention.layer_norm_rms_epsilon"), rope_base=get("llama.rope.freq_base", 10000.0))
    return p, t


def bound(p, k_scale):
    """As oracle.f32_bound, with the statistical growth of rounding errors instead of the worst case:
    the errors of round-to-nearest float32 sums are independent and unbiased, so a sum of K products
    errs by about sqrt(K) * u of sum |w x| (Higham and Mary, SIAM J. Sci. Comput. 2019; a factor 4
    covers the tail); worst-case K * u over 30 blocks would allow errors as large as the logits."""
    u = 2.0 ** -24
    K_max = max(p["n_embd"], p["n_ff"])
    return (2 * p["n_layer"] + 2) * 4 * np.sqrt(K_max) * u * oracle.forward.abs_sum * k_scale


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    args = ap.parse_args()
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch_model.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"SKIP: SmolLM2 cannot be fetched: {r.stderr.strip().splitlines()[-1] if r.stderr else ''}")
        return 0
    model = os.path.join(ROOT, r.stdout.strip())
    p, t = read_model(model)
    rng = np.random.default_rng(64)
    tokens = rng.integers(0, p["n_vocab"], 64).tolist()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.bin")
        ref = oracle.forward(t, p, tokens)
        b = bound(p, 1.0)
        got, kernel = oracle.run(args.tool, model, tokens, out)
        ok &= oracle.check(f"SmolLM2 dense f32 vs numpy ({kernel})", got, ref, b)
        pruned = oracle.map_linears(t, lambda w: oracle.prune_magnitude(w, 2, 4))
        ref24 = oracle.forward(pruned, p, tokens)
        got, kernel = oracle.run(args.tool, model, tokens, out, "--pattern", "2:4", "--format", "sparse24")
        ok &= oracle.check(f"SmolLM2 2:4 sparse24 f32 vs numpy ({kernel})", got, ref24, bound(p, 1.0))

        hf_dir, small = os.path.join(tmp, "hf"), os.path.join(tmp, "small.gguf")
        gguf_to_hf.convert(model, hf_dir, 4, 2, small)
        from_gguf, _ = oracle.run(args.tool, small, tokens, out)
        from_hf, _ = oracle.run(args.tool, hf_dir, tokens, out)
        same = np.array_equal(from_gguf, from_hf)
        print(f"{'ok' if same else 'FAIL':4} SmolLM2 (4 blocks) HF folder vs GGUF: logits "
              f"{'equal' if same else 'differ by %.3e' % np.abs(from_gguf - from_hf).max()}")
        ok &= same
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
