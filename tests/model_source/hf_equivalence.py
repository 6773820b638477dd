#!/usr/bin/env python3
"""ModelSource gives the same f32 tensors for a GGUF file and for the Hugging Face checkpoint
converted from it (issue 10 part 2, docs/design.md section 11.1).

SmolLM2 (scripts/fetch_model.sh) cut to its first --layers blocks is written twice by
gguf_to_hf.py, independently of nmkit: as GGUF (the original quantized blocks) and as an HF folder
(F32 shards + index, q/k rows un-permuted to HF's rotate-halves order). nmkit's ModelSource loads
both (tests/model_source/tool dumps every tensor under its GGUF name); the test checks the
hyper-parameters agree, the names and order agree, and every tensor of both equals, bit for bit,
gguf.quants.dequantize of the original blocks. Prints "SKIP: reason" when the model cannot be
fetched.
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
import gguf_to_hf  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    fetch = subprocess.run([os.path.join(ROOT, "scripts", "fetch_model.sh")], capture_output=True, text=True)
    if fetch.returncode != 0:
        print("SKIP: scripts/fetch_model.sh could not fetch SmolLM2:", fetch.stderr.strip().replace("\n", " | "))
        return 0
    model = os.path.join(ROOT, fetch.stdout.strip())
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        small, hf_dir = os.path.join(tmp, "small.gguf"), os.path.join(tmp, "hf")
        config, names = gguf_to_hf.convert(model, hf_dir, layers=args.layers, shards=2, gguf_out=small)
        dumps = {}
        for label, path in (("gguf", small), ("hf", hf_dir)):
            out = os.path.join(tmp, f"dump.{label}.gguf")
            run = subprocess.run([args.tool, "dump", path, out], capture_output=True, text=True)
            if run.returncode != 0:
                print(f"FAIL: model_source_tool dump {label}: {run.stderr.strip()}")
                return 1
            dumps[label] = gguf.GGUFReader(out)
        a, b = dumps["gguf"], dumps["hf"]
        keys = [k for k in a.fields if k.startswith("nmkit.") and k != "nmkit.kind"]
        for k in keys:
            if a.fields[k].contents() != b.fields[k].contents():
                failures.append(f"{k}: gguf {a.fields[k].contents()} hf {b.fields[k].contents()}")
        print("params:", {k[6:]: a.fields[k].contents() for k in keys})
        if a.fields["nmkit.n_layer"].contents() != args.layers or a.fields["nmkit.n_embd"].contents() != config["hidden_size"]:
            failures.append("the GGUF's hyper-parameters are not the model's")
        a_names, b_names = [t.name for t in a.tensors], [t.name for t in b.tensors]
        if a_names != b_names or sorted(a_names) != sorted(names):
            failures.append(f"tensor names differ: {a_names[:5]}... vs {b_names[:5]}...")
        src = {t.name: t for t in gguf.GGUFReader(small).tensors}
        for ta, tb in zip(a.tensors, b.tensors):
            s = src[ta.name]
            want = gguf.quants.dequantize(s.data, s.tensor_type).astype(np.float32, copy=False).reshape(-1)
            for label, t in (("gguf", ta), ("hf", tb)):
                got = np.asarray(t.data, dtype=np.float32).reshape(-1)
                if got.shape != want.shape or not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                    failures.append(f"{label} {t.name}: differs from gguf.quants.dequantize of the original")
        print(f"{len(a_names)} tensors compared ({args.layers} layers; q/k permuted back from HF order)")
    for f in failures[:20]:
        print("FAIL:", f)
    if failures:
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
