#!/usr/bin/env python3
"""Packed model files (`nmkit pack`, docs/design.md 11.9) on tiny generated llama models: a model
loaded from its packed file computes what the same form built on load computes, bit for bit (the
logits of a batched prefill and of decode steps, through nmkit_model_logits), for every weight form,
from a tied and an untied GGUF and from a Hugging Face folder; the PyPI gguf reader (independent of
nmkit) reads the file and finds the source's embedding bytes and one record header per layer; every
model command runs it as its form and refuses another; and bad files and outputs are one-line errors
with exit 1 and nothing written.

Usage: packed_model.py --nmkit PATH/TO/nmkit --tool PATH/TO/nmkit_model_logits
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_llama import P, write_hf, write_model  # noqa: E402

TOKENS = "5,17,200,3,99,140,7,250,31,64,12,128"
FORMS = [("f32", "dense", None), ("bf16", "dense", None), ("int8", "dense", None), ("f32", "sparse24", "2:4"),
         ("bf16", "nm", "6:8"), ("bf16", "nm", "4:8"), ("int8", "nm", "6:8"), ("int8", "sparse24", "2:4"),
         ("int8", "slid", "6:8"), ("f32", "nm", "3:7")]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)


def form_flags(weights, fmt, pattern):
    flags = ["--weights", weights, "--format", fmt]
    return flags + (["--pattern", pattern] if pattern else [])


def logits(tool, model, out, flags, mode):
    r = run([tool, model, TOKENS, out, "--mode", mode, *flags])
    if r.returncode != 0:
        return None, r.stderr.strip()
    return open(out, "rb").read(), r.stdout.strip()


def one_line_error(r, *needles):
    lines = [l for l in r.stderr.strip().splitlines() if l]
    return r.returncode == 1 and len(lines) == 1 and all(n in lines[0] for n in needles), r.stderr.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmkit", required=True)
    ap.add_argument("--tool", required=True)
    a = ap.parse_args()
    nmkit, tool = a.nmkit, a.tool
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(11)
        tied = os.path.join(tmp, "tied.gguf")
        untied = os.path.join(tmp, "untied.gguf")
        folder = os.path.join(tmp, "hf")
        tied_tensors = write_model(tied, rng)
        untied_rng = np.random.default_rng(12)
        write_model(untied, untied_rng, edit=lambda t: t.__setitem__(
            "output.weight", untied_rng.normal(0, 0.125, (P["n_vocab"], P["n_embd"])).astype(np.float32)))
        write_hf(folder, tied_tensors)  # q/k rows permuted on load: those weights are converted
        out = os.path.join(tmp, "logits")
        for source, forms in ((tied, FORMS), (untied, FORMS[:3] + FORMS[6:9]), (folder, [FORMS[4], FORMS[6]])):
            name = os.path.basename(source)
            for weights, fmt, pattern in forms:
                flags = form_flags(weights, fmt, pattern)
                form = " ".join(f for f in (weights, pattern, fmt) if f)
                packed = os.path.join(tmp, f"{name}.{weights}.{fmt}.{pattern or 'dense'}.gguf".replace(":", "x"))
                r = run([nmkit, "pack", source, "-o", packed, *flags])
                if r.returncode != 0:
                    check(False, f"pack {name} as {form}: {r.stderr.strip()}")
                    continue
                for mode in ("full", "decode"):
                    want, want_kernel = logits(tool, source, out, flags, mode)
                    got, got_kernel = logits(tool, packed, out, [], mode)
                    check(want is not None and want == got and want_kernel == got_kernel,
                          f"{name} {form} ({mode}): packed file's logits equal the form built on load, bit for bit "
                          f"({want_kernel} / {got_kernel})")
        # The file is GGUF: the PyPI reader reads it, and finds what the format says.
        import gguf
        packed = os.path.join(tmp, "tied.gguf.int8.nm.6x8.gguf")
        r = gguf.GGUFReader(packed)
        fields = {f.name: f for f in r.fields.values()}
        tensors = {t.name: t for t in r.tensors}
        src = {t.name: t for t in gguf.GGUFReader(tied).tensors}
        check(bytes(fields["nmkit.packed.pattern"].parts[-1]).decode() == "6:8" and
              bytes(fields["nmkit.packed.weights"].parts[-1]).decode() == "int8", "gguf reader: nmkit.packed.* keys")
        check(bytes(tensors["token_embd.weight"].data.tobytes()) == bytes(src["token_embd.weight"].data.tobytes()),
              "gguf reader: the embedding is the source's bytes")
        headers = [n for n in tensors if n.endswith(".nmkit.form")]
        check(len(headers) == 4 * P["n_layer"] + 1 and all(tensors[h].data.size == 12 for h in headers),
              f"gguf reader: one 12-field record header per linear group and the head ({len(headers)})")
        check(not any(n.endswith("attn_q.weight") for n in tensors), "no weight tensor of a linear is stored")
        check(all(tensors[n].data_offset % 64 == 0 for n in tensors if ".nmkit." in n),
              "every record array starts on 64 bytes")

        # Every model command runs the file as its form, and refuses another.
        r = run([nmkit, "generate", packed, "--prompt", "ab", "-n", "4"])
        check(r.returncode == 0 and "(int8 6:8 nm)" in r.stderr, f"generate names the file's form: {r.stderr.strip()}")
        r = run([nmkit, "generate", packed, "--prompt", "ab", "-n", "4", "--weights", "bf16"])
        ok, err = one_line_error(r, packed, "int8 6:8 nm, not bf16 dense")
        check(ok, f"another form is refused: {err}")
        r = run([nmkit, "bench", "model", packed, "--rounds", "1", "--decode", "2", "--prefill", "4", "--no-llamacpp"])
        check(r.returncode == 0 and "int8 6:8 nm packed" in r.stdout, "bench model runs the file's form")

        # Bad files: a record header, a mask, a truncated file; one line naming the file and layer.
        info = {t.name: t for t in gguf.GGUFReader(packed).tensors}
        def corrupt(label, tensor, offset, value, *needles):
            bad = os.path.join(tmp, "bad.gguf")
            data = bytearray(open(packed, "rb").read())
            data[info[tensor].data_offset + offset] = value
            open(bad, "wb").write(bytes(data))
            r = run([nmkit, "generate", bad, "--prompt", "ab", "-n", "2"])
            ok, err = one_line_error(r, "bad.gguf", *needles)
            check(ok, f"{label}: {err}")
        corrupt("record version", "blk.1.ffn_down.nmkit.form", 0, 7, "blk.1.ffn_down", "version = 7")
        corrupt("mask bits", "blk.0.attn_qkv.nmkit.meta", 0, 0xFF, "blk.0.attn_qkv", "more bits than 6:8 keeps")
        truncated = os.path.join(tmp, "truncated.gguf")
        open(truncated, "wb").write(open(packed, "rb").read()[:-4096])
        ok, err = one_line_error(run([nmkit, "generate", truncated, "--prompt", "ab", "-n", "2"]), "truncated.gguf")
        check(ok, f"truncated file: {err}")

        # Commands that need the weights themselves say what to give them instead.
        for args in (["convert", packed, "-o", os.path.join(tmp, "c.gguf")],
                     ["prune", packed, "-o", os.path.join(tmp, "p.gguf"), "--pattern", "2:4"]):
            ok, err = one_line_error(run([nmkit, *args]), "a packed model file holds no weight", "packed from")
            check(ok and not os.path.exists(args[3]), f"{args[0]} of a packed file: {err}")

        # Bad outputs and forms: nothing written.
        for args, needle in ((["-o", os.path.join(tmp, "x.txt"), "--weights", "int8"], "x.txt"),
                             (["-o", os.path.join(tmp, "x.gguf"), "--pattern", "9:8", "--format", "nm"], "9:8"),
                             (["-o", tied, "--weights", "int8"], tied)):
            r = run([nmkit, "pack", tied, *args])
            ok, err = one_line_error(r, needle)
            check(ok and not os.path.exists(os.path.join(tmp, "x.gguf")) and not os.path.exists(os.path.join(tmp, "x.txt")),
                  f"pack {' '.join(args[2:])}: {err}")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
