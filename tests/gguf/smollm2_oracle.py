#!/usr/bin/env python3
"""Dequantization of real blocks: the SmolLM2-135M GGUF (Q8_0 embedding, Q4_1 linear weights, F32
norms; fetched by scripts/fetch_model.sh) against the PyPI gguf package (docs/design.md 11.1).

nmkit's test driver dequantizes the embedding, every tensor of blocks 0 and 29 and the output norm
and writes them with write_gguf (F32) and the file's full metadata (49152-token vocabulary
included); the values must equal gguf.quants.dequantize bit for bit, and gguf.GGUFReader must read
the metadata back byte for byte. A copy written with every tensor's stored bytes unchanged must
read back the same and be byte-identical to the original file. Prints "SKIP: reason" (and CTest reports the test skipped) when the
model cannot be fetched.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tool", required=True)
    args = parser.parse_args()
    fetch = subprocess.run([os.path.join(ROOT, "scripts", "fetch_model.sh")], capture_output=True, text=True)
    if fetch.returncode != 0:
        print("SKIP: scripts/fetch_model.sh could not fetch SmolLM2:", fetch.stderr.strip().replace("\n", " | "))
        return 0
    print(fetch.stderr.strip())
    model = os.path.join(ROOT, fetch.stdout.strip())
    src = gguf.GGUFReader(model)
    names = [t.name for t in src.tensors
             if t.name in ("token_embd.weight", "output_norm.weight") or t.name.startswith(("blk.0.", "blk.29."))]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "dequantized.gguf")
        run = subprocess.run([args.tool, "dequantize", model, out_path, *names], capture_output=True, text=True)
        if run.returncode != 0:
            print("FAIL: gguf_tool dequantize:", run.stderr.strip())
            return 1
        out = gguf.GGUFReader(out_path)
        src_fields = [(k, f) for k, f in src.fields.items() if not k.startswith("GGUF.")]
        out_fields = [(k, f) for k, f in out.fields.items() if not k.startswith("GGUF.")]
        if [k for k, _ in src_fields] != [k for k, _ in out_fields]:
            failures.append("metadata keys or their order differ")
        else:
            for (key, a), (_, b) in zip(src_fields, out_fields):
                if [bytes(p) for p in a.parts[2:]] != [bytes(p) for p in b.parts[2:]]:
                    failures.append(f"metadata {key}: value bytes differ")
        if [t.name for t in out.tensors] != names:
            failures.append("tensor order differs")
        by_name = {t.name: t for t in src.tensors}
        types = set()
        for t in out.tensors:
            s = by_name[t.name]
            types.add(s.tensor_type.name)
            want = gguf.quants.dequantize(s.data, s.tensor_type).astype(np.float32, copy=False)
            got = np.asarray(t.data, dtype=np.float32).reshape(want.shape)
            bad = np.nonzero(got.reshape(-1).view(np.uint32) != want.reshape(-1).view(np.uint32))[0]
            if bad.size:
                i = bad[0]
                failures.append(f"{t.name} ({s.tensor_type.name}): {bad.size} of {want.size} values differ, "
                                f"first at {i}: nmkit {got.reshape(-1)[i]!r} gguf {want.reshape(-1)[i]!r}")
        print(f"{len(names)} tensors of types {sorted(types)} compared")

        # A copy with every tensor's stored bytes unchanged (Q4_1 and Q8_0 kept quantized): the
        # gguf reader must see the same metadata, tensors, types, shapes and bytes.
        copy_path = os.path.join(tmp, "copy.gguf")
        run = subprocess.run([args.tool, "copy", model, copy_path], capture_output=True, text=True)
        if run.returncode != 0:
            failures.append(f"gguf_tool copy: {run.stderr.strip()}")
        else:
            copy = gguf.GGUFReader(copy_path)
            if [(t.name, t.tensor_type, list(t.shape)) for t in copy.tensors] != \
               [(t.name, t.tensor_type, list(t.shape)) for t in src.tensors]:
                failures.append("copy: tensor names, types or shapes differ")
            for a, b in zip(src.tensors, copy.tensors):
                if bytes(a.data) != bytes(b.data):
                    failures.append(f"copy: {a.name}: bytes differ")
            copy_fields = [(k, [bytes(p) for p in f.parts[2:]]) for k, f in copy.fields.items() if not k.startswith("GGUF.")]
            if copy_fields != [(k, [bytes(p) for p in f.parts[2:]]) for k, f in src_fields]:
                failures.append("copy: metadata differs")
            with open(model, "rb") as f1, open(copy_path, "rb") as f2:
                identical = f1.read() == f2.read()
            # The original was written by llama.cpp's gguf writer; nmkit's layout (order, padding,
            # alignment) is the same, so the copy is the same file.
            if not identical:
                failures.append("copy: not byte-identical to the original file")
            print(f"copy of {len(copy.tensors)} tensors read back; byte-identical to the original file: {identical}")
    for f in failures[:20]:
        print("FAIL:", f)
    if failures:
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
