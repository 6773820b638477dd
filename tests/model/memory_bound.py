#!/usr/bin/env python3
"""Peak memory of `nmkit eval` against what the model form holds (docs/design.md 14, issue 25).

A random-weight llama of the `test` shape (scripts/make_scale_model.py: hidden 1024, 4 blocks, ffn
4096, SmolLM2's vocabulary; 220 MB in BF16) is evaluated on one chunk of 512 tokens in every weight
form (f32/bf16/int8 x dense/2:4/6:8, and packed model files of two forms), each in a child process whose peak RSS the kernel reports
(wait4's ru_maxrss). Each run must stay within

    1.10 x the model's resident bytes + its KV cache + the fixed cost + its activations + 32 MiB

where the fixed cost is the peak RSS of the same command on the `tiny` shape (code, libraries, the
thread pool, the text and its tokens, the logits of a chunk) and the activations are the forward
pass's buffers for 512 tokens of this shape. design.md's bound allows 500 MB over 1.10 x the weights
and the cache at any size; at this size that would hide a second copy of the embedding (200 MB in
f32) or of every linear, which this tighter bound does not. The model's resident bytes come from
`nmkit eval --json` (LlamaModel::resident_bytes).

Usage: memory_bound.py --nmkit PATH/TO/nmkit
"""
import argparse
import json
import os
import sys
import tempfile

from scale_fixture import ROOT, fetched, make_scale_models, run_measured
FORMS = [("f32", None, "dense"), ("f32", "2:4", "sparse24"), ("f32", "6:8", "nm"),
         ("bf16", None, "dense"), ("bf16", "2:4", "sparse24"), ("bf16", "6:8", "nm"),
         ("int8", None, "dense"), ("int8", "2:4", "sparse24"), ("int8", "6:8", "slid")]
# The `test` shape's forward buffers per token (model/forward_common.h Scratch): x, xn, tmp (hidden
# each), qkv, att, gate_up, act; floats.
HIDDEN, HEADS, KV_HEADS, FF = 1024, 16, 4, 4096
HEAD_DIM = HIDDEN // HEADS
SCRATCH_FLOATS = 3 * HIDDEN + (HEADS + 2 * KV_HEADS) * HEAD_DIM + HEADS * HEAD_DIM + 3 * FF
CTX = 512
MIB = 1 << 20


# Packed model files of these forms (`nmkit pack`, design.md 11.9) are evaluated too: their linears
# run from the file's mapping, whose pages count in RSS like any.
PACKED_FORMS = [("int8", "6:8", "nm"), ("bf16", "2:4", "sparse24")]


def form_flags(form):
    weights, pattern, fmt = form
    return ["--weights", weights, "--format", fmt] + (["--pattern", pattern] if pattern else [])


def packed(nmkit, model, form, out_dir):
    """The model packed in `form` (a file in out_dir), or exits with the failure."""
    path = os.path.join(out_dir, os.path.basename(model) + "." + "-".join(x for x in form if x).replace(":", "x") + ".gguf")
    code, stderr, _ = run_measured([nmkit, "pack", model, "-o", path, *form_flags(form)])
    if code not in (0, None):
        sys.exit(f"FAIL nmkit pack {model} {form}: exit {code}: {stderr}")
    return path


def run_eval(nmkit, model, text, form, out_dir):
    """`nmkit eval` of `model` in `form` (None: a packed file, in its own form)."""
    out = os.path.join(out_dir, "r.json")
    cmd = [nmkit, "eval", model, "--text", text, "--chunks", "1", "--ctx", str(CTX), "--json", out]
    if form:
        cmd += form_flags(form)
    code, stderr, rss = run_measured(cmd)
    if code not in (0, None) or not os.path.exists(out):
        sys.exit(f"FAIL {' '.join(cmd)}: exit {code}, {'output written' if os.path.exists(out) else 'no output'}: {stderr}")
    with open(out) as f:
        result = json.load(f)
    os.unlink(out)
    return rss, result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmkit", required=True)
    args = ap.parse_args()
    tokenizer = fetched("fetch_model.sh")
    text = fetched("fetch_texts.sh", "eval")
    if not tokenizer or not text:
        print("SKIP: SmolLM2 (its tokenizer) or the evaluation text could not be fetched")
        return 0
    models, error = make_scale_models(tokenizer, ("tiny", "test"))
    if error:  # the PyPI gguf package or numpy missing, say: reported as skipped
        print(f"SKIP: could not make the model: {error}")
        return 0
    text = os.path.join(ROOT, text)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(" ".join(x for x in form if x), models["tiny"], models["test"], form) for form in FORMS]
        cases += [(" ".join(x for x in form if x) + " packed", packed(args.nmkit, models["tiny"], form, tmp),
                   packed(args.nmkit, models["test"], form, tmp), None) for form in PACKED_FORMS]
        for label, tiny, test, form in cases:
            fixed, _ = run_eval(args.nmkit, tiny, text, form, tmp)
            rss, r = run_eval(args.nmkit, test, text, form, tmp)
            held, kv = r["resident_bytes"], r["kv_cache_bytes"]
            activations = SCRATCH_FLOATS * 4 * CTX
            bound = 1.10 * held + kv + fixed + activations + 32 * MIB
            design_bound = 1.10 * held + kv + 500e6
            ok = rss <= bound and rss <= design_bound
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {label:<25} peak RSS {rss / MIB:7.1f} MiB, bound {bound / MIB:7.1f} "
                  f"(weights held {held / MIB:.1f}, KV {kv / MIB:.1f}, fixed {fixed / MIB:.1f}, "
                  f"activations {activations / MIB:.1f})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
