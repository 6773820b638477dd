#!/usr/bin/env python3
"""Writes the fuzz corpora of tests/fuzz (committed; rerun only to change them).

corpus/<target>/seed:       small valid inputs that start the fuzzer in the interesting places.
corpus/<target>/regression: every reproducer of issue 13 that a target can reach (C1 [2^48, 0]
                            records, the 50k-character name, deep JSON nesting, [2^32, 2^31, 0]
                            shapes, W3's [0, 4.8e18] tensor, W5's 0xF nibbles, control characters
                            and empty names, negative act-norms, M6's all-ones [4, 8], W1's slid
                            dense record); CI replays all of them on every run (scripts/fuzz.sh).
Files are written bytes-for-bytes from this script (no randomness), each named after what it holds.
"""
import json
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "U8": 1, "I8": 1, "F64": 8, "I64": 8}


def safetensors(tensors, metadata=None, raw_header=None):
    """tensors: list of (name, dtype, shape, data bytes); offsets laid out in order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, blob in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def record(fmt, pattern, dtype, shape, slide=None):
    r = {"format": fmt, "pattern": pattern, "dtype": dtype, "shape": shape}
    if slide is not None:
        r["slide"] = slide
    return json.dumps(r, separators=(",", ":"))


def slide_fields(keep, group, K, align):
    N = group // 2
    groups = -(-K // group)
    raw = groups * 4 * (N - 1)
    return {"pattern": "%d:%d" % (keep, group), "N": N, "window": 4, "stride": 2,
            "windows_per_group": N - 1, "K": K, "K_pad": groups * group,
            "K_prime": -(-raw // align) * align, "align": align}


def pack_sparse24(rows):
    """Dense rows (lists of floats, K a multiple of 4, <= 2 non-zeros per group) -> values, meta."""
    values, meta = [], b""
    for row in rows:
        nibbles = []
        for g in range(0, len(row), 4):
            group = row[g:g + 4]
            pos = [i for i, v in enumerate(group) if v != 0]
            pos += [i for i in range(4) if i not in pos][:2 - len(pos)]
            pos.sort()
            values += [group[pos[0]], group[pos[1]]]
            nibbles.append(pos[0] | pos[1] << 2)
        if len(nibbles) % 2:
            nibbles.append(0)
        meta += bytes(nibbles[i] | nibbles[i + 1] << 4 for i in range(0, len(nibbles), 2))
    return f32(values), meta


def pack_nm(rows, keep, group):
    values, mask = [], b""
    for row in rows:
        bits = 0
        for g in range(0, len(row), group):
            block = row[g:g + group]
            pos = [i for i, v in enumerate(block) if v != 0]
            pos += [i for i in range(group) if i not in pos][:keep - len(pos)]
            pos.sort()
            values += [block[p] for p in pos]
            for p in pos:
                bits |= 1 << (g + p)
        mask += bits.to_bytes((len(row) + 7) // 8, "little")
    return f32(values), mask


def gguf_string(text):
    data = text if isinstance(text, bytes) else text.encode()
    return struct.pack("<Q", len(data)) + data


def gguf_value(kind, value):
    """kind: 'u32' | 'i32' | 'f32' | 'bool' | 'str' | ('arr', elem_kind, [values])."""
    codes = {"u8": 0, "i8": 1, "u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8, "arr": 9, "u64": 10}
    if isinstance(kind, tuple):
        _, elem, values = kind
        body = struct.pack("<IQ", codes[elem if isinstance(elem, str) else "arr"], len(values))
        for v in values:
            body += gguf_value(elem, v)[4:]
        return struct.pack("<I", 9) + body
    packs = {"u8": "<B", "i8": "<b", "u32": "<I", "i32": "<i", "f32": "<f", "bool": "<?", "u64": "<Q"}
    if kind == "str":
        return struct.pack("<I", 8) + gguf_string(value)
    return struct.pack("<I", codes[kind]) + struct.pack(packs[kind], value)


def gguf(kvs, tensors, alignment=32, version=3):
    """kvs: [(key, kind, value)]; tensors: [(name, ne list, ggml type, data bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, kind, value in kvs:
        out += gguf_string(key) + gguf_value(kind, value)
    offset, data = 0, b""
    for name, ne, ggml_type, blob in tensors:
        out += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", ggml_type, offset)
        data += blob + b"\0" * ((-len(blob)) % alignment)
        offset = len(data)
    return out + b"\0" * ((-len(out)) % alignment) + data


def byte_char(b):
    """GPT-2's bytes_to_unicode for one byte."""
    nxt, cp = 256, None
    for x in range(256):
        printable = 0x21 <= x <= 0x7E or 0xA1 <= x <= 0xAC or x >= 0xAE
        c = x if printable else nxt
        if not printable:
            nxt += 1
        if x == b:
            cp = c
    return chr(cp)


def write(target, kind, name, data):
    path = os.path.join(HERE, "corpus", target, kind, name)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def main():
    for target in ("fuzz_safetensors_header", "fuzz_checkpoint_record", "fuzz_stored_weights", "fuzz_gguf",
                   "fuzz_tokenizer"):
        for kind in ("seed", "regression"):
            d = os.path.join(HERE, "corpus", target, kind)
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)

    # --- valid checkpoints: the seeds of both file targets
    dense24 = [[0.5, 0, -2, 0, 0, 0, 0, 3], [1, 1, 0, 0, 0, -1, 0, 0.25]]
    v24, m24 = pack_sparse24(dense24)
    dense68 = [[1, 2, 3, 0, 5, 6, 7, 0, 1, 0, 1, 0], [0] * 12]  # K = 12: tail group of 4
    v68, m68 = pack_nm([r + [0] * 4 for r in dense68], 6, 8)
    slid = [[1, 0, 2, 0] * 8]
    seeds = {
        "plain_tensors.safetensors": safetensors(
            [("embed.weight", "F32", [2, 3], f32([1, 2, 3, 4, 5, 6])), ("norm", "BF16", [2], b"\x80\x3f\x00\x40"),
             ("step", "I64", [], struct.pack("<q", 7)), ("empty", "U8", [0, 3], b"")], {"format": "pt"}),
        "sparse24.safetensors": safetensors(
            [("w.values", "F32", [2, 4], v24), ("w.meta", "U8", [2, 1], m24)],
            {"nmkit.w": record("sparse24", "2:4", "F32", [2, 8])}),
        "nm_6_8.safetensors": safetensors(
            [("w.values", "F32", [2, 12], v68), ("w.mask", "U8", [2, 2], m68)],
            {"nmkit.w": record("nm", "6:8", "F32", [2, 12])}),
        "dense_record.safetensors": safetensors(
            [("w", "F32", [2, 8], f32(sum(dense24, [])))], {"nmkit.w": record("dense", "2:4", "F32", [2, 8])}),
        "slid_sparse24.safetensors": safetensors(
            [("w.values", "F32", [1, 16], pack_sparse24(slid)[0]), ("w.meta", "U8", [1, 4], pack_sparse24(slid)[1])],
            {"nmkit.w": record("sparse24", "2:4", "F32", [1, 32], slide_fields(6, 8, 20, 32))}),
    }
    for name, data in seeds.items():
        write("fuzz_safetensors_header", "seed", name, data)
        write("fuzz_stored_weights", "seed", name, data)

    # --- issue 13 reproducers that are files
    big = 2 ** 48
    files = {
        # C1: 312 bytes, zero-byte parts, 2^48 rows: inspect and linear looped for days.
        "c1_sparse24_2p48_by_0.safetensors": safetensors(
            [("w.values", "F32", [big, 0], b""), ("w.meta", "U8", [big, 0], b"")],
            {"nmkit.w": record("sparse24", "2:4", "F32", [big, 0])}),
        "c1_nm_2p48_by_0.safetensors": safetensors(
            [("w.values", "F32", [big, 0], b""), ("w.mask", "U8", [big, 0], b"")],
            {"nmkit.w": record("nm", "6:8", "F32", [big, 0])}),
        "c1_dense_2p48_by_0.safetensors": safetensors([("w", "F16", [big, 0], b"")],
                                                      {"nmkit.w": record("dense", "2:4", "F16", [big, 0])}),
        # C2 / M4: a 50k-character name (std::regex overflowed its stack on it).
        "c2_50k_name.safetensors": safetensors([("a" * 50000 + ".weight", "F32", [1, 4], f32([1, 0, 0, 1]))]),
        # W2: the uint64 check passes, the int64 product overflowed.
        "w2_2p32_2p31_0.safetensors": safetensors([("w", "F32", [2 ** 32, 2 ** 31, 0], b"")]),
        "w2_2p31_2p31_2p31_0.safetensors": safetensors([("w", "U8", [2 ** 31, 2 ** 31, 2 ** 31, 0], b"")]),
        # W3: [0, K] with K >= ~4.8e18 costs no bytes; slide's sizes wrapped.
        "w3_0_by_4p8e18.safetensors": safetensors([("w", "F32", [0, 4800000000000000000], b"")]),
        # W5: an invalid 0xF nibble in a sparse24 weight.
        "w5_nibble_0xf.safetensors": safetensors(
            [("w.values", "F32", [2, 4], v24), ("w.meta", "U8", [2, 1], bytes([0xFF, m24[1]]))],
            {"nmkit.w": record("sparse24", "2:4", "F32", [2, 8])}),
        # M3 / M5: control characters and an empty name.
        "m3_control_chars_in_name.safetensors": safetensors([("w\n\x1b[31mred\r\t", "F32", [1], f32([1]))]),
        "m5_empty_name.safetensors": safetensors([("", "F32", [2], f32([1, 2]))]),
        # W4: negative act-norms (a file like any other to the reader).
        "w4_negative_act_norms.safetensors": safetensors([("fc1.weight", "F32", [4], f32([1, -0.5, 2, -0.0]))]),
        # M6: all-ones [4, 8] dense, called "sparsest 8:10".
        "m6_all_ones_4x8.safetensors": safetensors([("w", "F32", [4, 8], f32([1] * 32))]),
        # W1: a slid weight stored dense (prune dropped its slide record).
        "w1_slid_dense.safetensors": safetensors(
            [("w", "F32", [1, 32], f32(slid[0]))],
            {"nmkit.w": record("dense", "2:4", "F32", [1, 32], slide_fields(6, 8, 20, 32))}),
        # R1: deep nesting in the header (96 MB took 3.5 GB; 20k levels here) and in a record.
        "r1_deep_nesting_header.safetensors": safetensors([], raw_header=b"[" * 20000 + b"]" * 20000),
        "r1_deep_nesting_metadata.safetensors": safetensors(
            [], raw_header=b'{"__metadata__":{"a":' + b"[" * 10000 + b"]" * 10000 + b"}}"),
        "r1_deep_nesting_record.safetensors": safetensors(
            [("w", "F32", [1], f32([1]))], {"nmkit.w": "{" + '"a":{' * 5000 + "}" * 5001}),
        # A length prefix past the file and past the 100 MB cap.
        "length_past_file.safetensors": struct.pack("<Q", 2 ** 63) + b"{}",
        "length_above_cap.safetensors": struct.pack("<Q", 100_000_001) + b"{}",
        # Record shapes at and past the 2^48 cap, and parts disagreeing with the record.
        "record_shape_above_2p48.safetensors": safetensors(
            [("w.values", "F32", [0, 0], b""), ("w.meta", "U8", [0, 0], b"")],
            {"nmkit.w": record("sparse24", "2:4", "F32", [0, big + 1])}),
        "record_0_by_2p48.safetensors": safetensors(
            [("w.values", "F32", [0, big // 2], b""), ("w.meta", "U8", [0, big // 8], b"")],
            {"nmkit.w": record("sparse24", "2:4", "F32", [0, big])}),
        "nm_bits_wrong.safetensors": safetensors(
            [("w.values", "F32", [2, 12], v68), ("w.mask", "U8", [2, 2], b"\xff\xff\x00\x00")],
            {"nmkit.w": record("nm", "6:8", "F32", [2, 12])}),
    }
    for name, data in files.items():
        write("fuzz_safetensors_header", "regression", name, data)
        write("fuzz_stored_weights", "regression", name, data)

    # --- records (the JSON text alone)
    record_seeds = {
        "dense.json": record("dense", "2:4", "BF16", [384, 1536]),
        "sparse24.json": record("sparse24", "2:4", "F16", [7, 10]),
        "nm.json": record("nm", "3:7", "F32", [5, 100]),
        "slid.json": record("sparse24", "2:4", "F32", [4, 32], slide_fields(6, 8, 20, 32)),
        "slid_64.json": record("dense", "2:4", "BF16", [2, 128], slide_fields(62, 64, 64, 4)),
    }
    for name, text in record_seeds.items():
        write("fuzz_checkpoint_record", "seed", name, text)
    record_regressions = {
        "c1_sparse24_2p48_by_0.json": record("sparse24", "2:4", "F32", [big, 0]),
        "c1_nm_2p48_by_0.json": record("nm", "6:8", "F32", [big, 0]),
        "shape_2p48_plus_1.json": record("nm", "6:8", "F32", [1, big + 1]),
        "shape_2p64.json": '{"format":"dense","pattern":"2:4","dtype":"F32","shape":[18446744073709551616,1]}',
        "shape_negative.json": record("dense", "2:4", "F32", [-1, 4]),
        "w3_slide_k_huge.json": record("sparse24", "2:4", "F32", [1, 4]) [:-1] +
            ',"slide":' + json.dumps(dict(slide_fields(62, 64, 4, 4), K=4800000000000000000)) + "}",
        "slide_k_2p48.json": record("sparse24", "2:4", "F32", [1, slide_fields(62, 64, big, 4)["K_prime"]],
                                    slide_fields(62, 64, big, 4)),
        "slide_align_0.json": record("sparse24", "2:4", "F32", [1, 4], dict(slide_fields(6, 8, 4, 4), align=0)),
        "slide_odd_group.json": record("sparse24", "2:4", "F32", [1, 4], dict(slide_fields(6, 8, 4, 4), pattern="4:7")),
        "r1_deep_nesting.json": "[" * 20000 + "]" * 20000,
        "r1_deep_objects.json": '{"a":' * 20000 + "1" + "}" * 20000,
        "unknown_field.json": record("dense", "2:4", "F32", [1, 4])[:-1] + ',"x":1}',
        "pattern_0_0.json": record("nm", "0:0", "F32", [1, 4]),
        "pattern_64_64.json": record("nm", "64:64", "F32", [1, 4]),
        "name_50k.json": record("dense", "2:4", "F32", [1, 4])[:-1] + ',"' + "a" * 50000 + '":1}',
        "control_chars.json": '{"format":"dense\\u0000\\n","pattern":"2:4","dtype":"F32","shape":[1,4]}',
    }
    for name, text in record_regressions.items():
        write("fuzz_checkpoint_record", "regression", name, text)

    # --- GGUF files (ne in ggml order: ne[0] is the contiguous dimension)
    F32, F16, Q8_0 = 0, 1, 8
    tokens = [byte_char(b) for b in range(256)] + ["he", "ll", "hell", "<|im_end|>"]
    vocab_kvs = [("general.architecture", "str", "llama"), ("tokenizer.ggml.model", "str", "gpt2"),
                 ("tokenizer.ggml.pre", "str", "smollm"), ("tokenizer.ggml.tokens", ("arr", "str", tokens), None),
                 ("tokenizer.ggml.merges", ("arr", "str", ["h e", "l l", "he ll"]), None),
                 ("tokenizer.ggml.token_type", ("arr", "i32", [1] * 259 + [3]), None),
                 ("tokenizer.ggml.eos_token_id", "u32", 259)]
    q8_block = struct.pack("<e", 0.5) + bytes(range(32))  # one Q8_0 block: f16 scale, 32 int8
    gguf_seeds = {
        "tensors.gguf": gguf([("general.architecture", "str", "llama"), ("general.alignment", "u32", 32)],
                             [("w", [4, 2], F32, f32(range(8))), ("h", [3], F16, struct.pack("<3e", 1, -2, 0.5)),
                              ("q", [32, 1], Q8_0, q8_block)]),
        "vocab.gguf": gguf([(k, kind if v is None else kind, v) if not isinstance(kind, tuple) else (k, kind, None)
                            for k, kind, v in vocab_kvs], []),
    }
    for name, data in gguf_seeds.items():
        write("fuzz_gguf", "seed", name, data)
    nested = ("arr", "i32", [1])
    for _ in range(9):
        nested = ("arr", nested, [nested[2]])
    gguf_regressions = {
        "w2_2p32_2p31_0.gguf": gguf([], [("w", [0, 2 ** 31, 2 ** 32], F32, b"")]),
        "c1_2p48_by_0.gguf": gguf([], [("w", [0, 2 ** 48], F32, b"")]),
        "ne_2p63.gguf": gguf([], [("w", [2 ** 32, 2 ** 31], F32, b"")]),
        "c2_50k_name.gguf": gguf([], [("a" * 50000, [4], F32, f32([1, 2, 3, 4]))]),
        "key_50k.gguf": gguf([("k" * 50000, "u32", 1)], []),
        "array_depth_10.gguf": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("deep") + gguf_value(nested, None),
        "n_kv_2p63.gguf": b"GGUF" + struct.pack("<IQQ", 3, 0, 2 ** 63),
        "n_tensors_2p40.gguf": b"GGUF" + struct.pack("<IQQ", 3, 2 ** 40, 0),
        "string_len_2p63.gguf": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2 ** 63) + b"k",
        "array_count_2p40.gguf": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("a") +
                                 struct.pack("<IIQ", 9, 4, 2 ** 40),
        "n_dims_5.gguf": gguf([], [("w", [1, 1, 1, 1, 1], F32, f32([1]))]),
        "alignment_0.gguf": gguf([("general.alignment", "u32", 0)], [("w", [1], F32, f32([1]))]),
        "alignment_3.gguf": gguf([("general.alignment", "u32", 3)], [("w", [1], F32, f32([1]))]),
        "unknown_ggml_type.gguf": gguf([], [("w", [1], 99, f32([1]))]),
        "offset_past_file.gguf": gguf([], [("w", [1024], F32, f32([1]))]),
        "version_1.gguf": gguf([], [], version=1),
        "control_chars_name.gguf": gguf([], [("w\n\x1b[31m", [1], F32, f32([1]))]),
        "empty_name.gguf": gguf([], [("", [1], F32, f32([1]))]),
        "vocab_merge_unknown_token.gguf": gguf(
            [(k, kind, v) for k, kind, v in vocab_kvs if k != "tokenizer.ggml.merges"] +
            [("tokenizer.ggml.merges", ("arr", "str", ["x y"]), None)], []),
        "vocab_eos_out_of_range.gguf": gguf(
            [(k, kind, v) for k, kind, v in vocab_kvs if k != "tokenizer.ggml.eos_token_id"] +
            [("tokenizer.ggml.eos_token_id", "u32", 2 ** 31)], []),
    }
    for name, data in gguf_regressions.items():
        write("fuzz_gguf", "regression", name, data)

    # --- tokenizer text: byte 0 picks the pre-tokenizer (low bits) and parse_special (bit 7)
    texts = {
        "hello_world.txt": b"\x00hello world 12345",
        "chat_special.txt": b"\x81<|im_start|>user\nhi<|im_end|>\n",
        "unicode.txt": "\x02 naïve café 日本語 🙂 \t\r\n  x".encode(),
        "digits.txt": b"\x01" + b"1234567890" * 4,
    }
    for name, data in texts.items():
        write("fuzz_tokenizer", "seed", name, data)
    token_regressions = {
        "c2_50k_word.txt": b"\x00" + b"a" * 50000,
        "invalid_utf8.txt": b"\x00\xff\xfe\xc3\x28\xe2\x82",
        "nul_bytes.txt": b"\x80\x00\x00<|im_end|\x00",
        "many_spaces.txt": b"\x03" + b" " * 20000,
        "unfinished_special.txt": b"\x81<|im_start" * 100,
    }
    for name, data in token_regressions.items():
        write("fuzz_tokenizer", "regression", name, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
