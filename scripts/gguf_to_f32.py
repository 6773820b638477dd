#!/usr/bin/env python3
"""Writes a copy of a GGUF model with every tensor dequantized to F32 (docs/data.md).

The values come from the PyPI `gguf` package's gguf.quants.dequantize (numpy float32, no fused
multiply-add): the same numbers nmkit's GGUF reader is tested to produce bit for bit
(docs/design.md section 11.1), so this F32 file is exactly the model nmkit calls "dense". llama.cpp's
own `llama-quantize --allow-requantize IN OUT F32` would compute d*q+m in C, where the compiler may
contract it into one FMA, and so could differ in the last bit.

Metadata are copied in file order, except the reader's virtual GGUF.* fields and the architecture
(GGUFWriter writes it first itself); general.file_type becomes 0 (all F32). The output is written to
OUT.tmp and renamed onto OUT only when complete.

Usage: gguf_to_f32.py IN.gguf OUT.gguf
"""
import os
import sys

try:
    import gguf
    import numpy as np
except ImportError as e:
    sys.exit(f"gguf_to_f32: needs the PyPI packages gguf and numpy ({e})")


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: gguf_to_f32.py IN.gguf OUT.gguf")
    src, dst = sys.argv[1], sys.argv[2]
    reader = gguf.GGUFReader(src)
    arch_field = reader.fields[gguf.Keys.General.ARCHITECTURE]
    arch = arch_field.contents()
    tmp = dst + ".tmp"
    writer = gguf.GGUFWriter(tmp, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        value = field.contents()
        if field.name == gguf.Keys.General.FILE_TYPE:
            value = int(gguf.LlamaFileType.ALL_F32)
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, vtype, sub_type=sub_type)
    for tensor in reader.tensors:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32, copy=False)
        # numpy shape is ne reversed; dequantize returns the logical shape of the tensor.
        writer.add_tensor(tensor.name, np.ascontiguousarray(values))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, dst)


if __name__ == "__main__":
    main()
