#!/usr/bin/env python3
"""The model commands' holes of issue 24, each reproducer as a test, on tiny generated llama models
(tests/model/tiny_llama.py) and, where size or a real tokenizer matters, SmolLM2 (SKIP lines when it
cannot be fetched, or when llama.cpp's tools are not built):
  1. an output that is, or lies in, what the input reads (a folder's weights, a shard) is refused;
  2. a failed allocation (under `ulimit -v`, in a child shell) is one line and exit 1, never an abort;
     a model that cannot fit is refused before loading; --text/--calib only read regular files;
  3. `bench model` runs llama-bench without a shell and only on the same model (a fake llama-bench
     records its argument vector);
  4. prune's --include/--exclude apply to a model's linears, by GGUF or Hugging Face name;
  5. values that do not fit --dtype f16 and non-finite eps / rope base are errors naming them;
  6. a signal leaves no temporary folder or file; racing writers of one new folder both succeed;
  7. bad -o, --text folders, inspect of a folder, vocabulary mismatches fail early and clearly, and
     eval --chunks reads only the text it needs;
  8. `nmkit convert` (GGUF <-> Hugging Face folder, dtypes; the PyPI gguf reader and llama.cpp check
     the GGUF written from a folder), prune without a pattern, --help.
A check prints "ok"/"FAIL" with what it saw.

Usage: cli_model_paths.py --nmkit PATH/TO/nmkit
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_llama import P, read_gguf, write_hf, write_model  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LLAMACPP_BIN = os.path.join(ROOT, ".cache", "llamacpp", "build", "bin")
PROSE = ("It was a bright cold day in April, and the clocks were striking thirteen. Winston Smith, his chin "
         "nuzzled into his breast in an effort to escape the vile wind, slipped quickly through the glass "
         "doors of Victory Mansions.\n")
CALIB = ["--calib-seqs", "2", "--calib-len", "32"]  # within the tiny model's context of 128
failures = []
NMKIT = None


def run(args, **kw):
    kw.setdefault("timeout", 300)
    try:
        return subprocess.run(args, capture_output=True, text=True, errors="replace", **kw)
    except subprocess.TimeoutExpired:  # a failure of the check, not of the script
        return subprocess.CompletedProcess(args, -9, "", f"timed out after {kw['timeout']} s")


def nmkit(*args, **kw):
    return run([NMKIT, *args], **kw)


def limited(kbytes, *args, **kw):
    """nmkit under `ulimit -v KBYTES`, in a child shell."""
    return run(["bash", "-c", f'ulimit -v {kbytes} && exec "$@"', "bash", NMKIT, *args], **kw)


def check(label, ok, seen=""):
    print(f"{'ok' if ok else 'FAIL':4} {label}: {seen}")
    if not ok:
        failures.append(label)


def snapshot(*paths):
    """Path -> sha256 of every file under `paths` (to show an input untouched, an output not made)."""
    out = {}
    for top in paths:
        for folder, _, files in os.walk(top):
            for name in files:
                with open(os.path.join(folder, name), "rb") as f:
                    out[os.path.join(folder, name)] = hashlib.sha256(f.read()).hexdigest()
    return out


def temporaries(folder):
    return sorted(n for n in os.listdir(folder) if ".tmp." in n)


def expect_error(label, r, *needles, absent=(), folder=None):
    """Exit 1, one line "nmkit: ..." holding every needle, the `absent` paths not there, and no
    temporary left in `folder`."""
    lines = r.stderr.strip().splitlines()
    ok = (r.returncode == 1 and len(lines) == 1 and lines[0].startswith("nmkit: ")
          and all(n in lines[0] for n in needles))
    problems = [f"{p} exists" for p in absent if os.path.exists(p)]
    if folder is not None and temporaries(folder):
        problems.append(f"left {temporaries(folder)}")
    check(label, ok and not problems, f"exit {r.returncode}: {' | '.join(lines)} {' '.join(problems)}")


# ---------------------------------------------------------------------------------------------------
def item1_data_loss(tmp, tiny_tensors):
    hf = os.path.join(tmp, "hf1")
    write_hf(hf, tiny_tensors)
    sharded = os.path.join(tmp, "hf2")
    write_hf(sharded, tiny_tensors, shards=2)
    before = snapshot(hf, sharded)
    expect_error("1: prune HF -o HF/model.safetensors is refused",
                 nmkit("prune", hf, "-o", os.path.join(hf, "model.safetensors"), "--pattern", "2:4"),
                 "model.safetensors", "same file", folder=hf)
    shard = os.path.join(sharded, "model-00001-of-00002.safetensors")
    expect_error("1: prune HF -o HF/shard is refused", nmkit("prune", sharded, "-o", shard, "--pattern", "2:4"),
                 "model-00001-of-00002.safetensors", "same file", folder=sharded)
    expect_error("1: convert HF -o HF/model.safetensors is refused",
                 nmkit("convert", hf, "-o", os.path.join(hf, "model.safetensors")), "same file", folder=hf)
    expect_error("1: prune HF -o HF/ (the input folder itself) is refused",
                 nmkit("prune", hf, "-o", hf + "/", "--pattern", "2:4"), "same file", folder=tmp)
    check("1: the input folders are unchanged", snapshot(hf, sharded) == before)
    # An input file inside the output folder would go with the folder it is replaced by.
    trap = os.path.join(tmp, "trap")
    os.makedirs(trap)
    shutil.copy(os.path.join(tmp, "tiny.gguf"), os.path.join(trap, "config.json"))
    trap_before = snapshot(trap)
    expect_error("1: an output folder holding the input is refused",
                 nmkit("convert", os.path.join(trap, "config.json"), "-o", trap + "/"), "holds the input",
                 folder=tmp)
    check("1: the input inside it is unchanged", snapshot(trap) == trap_before)


def item2_allocation(tmp):
    big_text = os.path.join(tmp, "zeros.txt")  # 3 GiB of NUL bytes (valid UTF-8), a hole on disk
    with open(big_text, "wb") as f:
        f.truncate(3 << 30)
    tiny = os.path.join(tmp, "tiny.gguf")
    out_json = os.path.join(tmp, "none.json")
    r = limited(2000000, "eval", tiny, "--text", big_text, "--ctx", "64", "--json", out_json)
    expect_error("2: eval of a 3 GiB text under ulimit -v 2000000", r, "cannot allocate", "ulimit -v",
                 absent=[out_json], folder=tmp)
    out = os.path.join(tmp, "none.gguf")
    r = limited(2000000, "prune", tiny, "-o", out, "--pattern", "2:4", "--method", "wanda", "--calib", big_text,
                *CALIB)
    expect_error("2: prune --calib of a 3 GiB text under ulimit -v 2000000", r, "cannot allocate", big_text,
                 absent=[out], folder=tmp)
    os.remove(big_text)

    # A model 4.5 GB in f32 (Q4_0 zeros on disk, a 319 MB sparse file): refused before loading.
    big = os.path.join(tmp, "big.gguf")
    write_model(big, None, p=dict(n_vocab=32000, n_embd=4096, n_layer=2, n_head=32, n_head_kv=8, n_ff=14336,
                                  n_ctx=128, rms_eps=1e-5), sparse_q4_0=True)
    r = limited(2000000, "prune", big, "-o", out, "--pattern", "2:4")
    expect_error("2: prune of a model larger than the memory", r, big, "needs at least", "available (ulimit -v)",
                 absent=[out], folder=tmp)
    r = limited(2000000, "generate", big, "--prompt", "hello")
    expect_error("2: generate with a model larger than the memory", r, big, "needs at least", "available")
    os.remove(big)

    # Only regular files are read as text: no endless read of a device, no wait on a FIFO.
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    for path, kind in (("/dev/zero", "character device"), ("/dev/urandom", "character device"),
                       (fifo, "FIFO"), (tmp + "/", "folder")):
        expect_error(f"2/7: eval --text {path}", nmkit("eval", tiny, "--text", path, timeout=60), path, kind,
                     "not a text file")
    expect_error("2: prune --calib /dev/zero", nmkit("prune", tiny, "-o", out, "--pattern", "2:4", "--method",
                                                      "wanda", "--calib", "/dev/zero", *CALIB, timeout=60),
                 "/dev/zero", "not a text file", absent=[out])
    os.remove(fifo)


def item3_bench(tmp):
    folder = os.path.join(tmp, "bench")
    os.makedirs(folder)
    model = os.path.join(folder, "tiny.gguf")
    shutil.copy(os.path.join(tmp, "tiny.gguf"), model)
    # The same model under a name holding a shell command substitution: llama-bench gets it as a name.
    same = os.path.join(folder, "tiny'$(touch PWNED)'.F32.gguf")
    check("3: convert writes the baseline file", nmkit("convert", model, "-o", same).returncode == 0)
    # Another model beside it never becomes the baseline.
    other = os.path.join(folder, "other.Q8_0.gguf")
    write_model(other, np.random.default_rng(3), p=dict(P, n_ff=96))
    log = os.path.join(tmp, "llama-bench.log")
    fake = os.path.join(tmp, "llama-bench")
    with open(fake, "w") as f:
        f.write("#!/usr/bin/env python3\nimport json, os, sys\n"
                "with open(os.environ['FAKE_LOG'], 'a') as f:\n    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
                "print(json.dumps([{'n_prompt': 8, 'n_gen': 0, 'avg_ts': 100.0},"
                " {'n_prompt': 0, 'n_gen': 4, 'avg_ts': 50.0}]))\n")
    os.chmod(fake, 0o755)
    env = dict(os.environ, FAKE_LOG=log)
    common = ["bench", "model", model, "--rounds", "1", "--decode", "4", "--prefill", "8", "--variants",
              "f32 dense", "--llama-bench", fake]
    r = nmkit(*common, cwd=tmp, env=env)
    calls = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
    models = [c[c.index("-m") + 1] for c in calls]
    check("3: bench model runs llama-bench on the same model only, its argv as given",
          r.returncode == 0 and models == [same] and calls[0][:2] == ["-m", same] and calls[0][-2:] == ["-o", "json"]
          and "F32" in r.stdout, f"exit {r.returncode}, calls {calls}")
    check("3: the other model is skipped with a note", "not the same model" in r.stderr and "n_ff" in r.stderr,
          r.stderr.strip())
    # A model with no baseline file beside it: the table says nothing of llama.cpp, the note says why.
    alone = os.path.join(tmp, "alone")
    os.makedirs(os.path.join(alone, "sub"))
    shutil.copy(model, os.path.join(alone, "sub", "tiny.gguf"))
    r = nmkit("bench", "model", os.path.join(alone, "sub", "tiny.gguf"), *common[3:], cwd=tmp, env=env)
    check("3: no baseline file: a note names how to make one", r.returncode == 0 and
          "no llama.cpp baseline" in r.stderr and "--llamacpp-model" in r.stderr, r.stderr.strip())
    # The read probe beside every round (docs/design.md 13): held together, one probe per form and round.
    report = os.path.join(tmp, "bench.json")
    r = nmkit("bench", "model", model, "--rounds", "2", "--decode", "2", "--prefill", "4", "--no-llamacpp",
              "--variants", "f32 dense,int8 dense", "--json", report, cwd=tmp)
    rows = [x for x in json.load(open(report)) if x.get("engine") == "nmkit"] if r.returncode == 0 else []
    check("3: each form has a probe per round and its share of them",
          len(rows) == 2 and all(len(x["read_gbs_rounds"]) == 2 and min(x["read_gbs_rounds"]) > 0 and
                                 x["read_share"] > 0 for x in rows) and "median of 4 probes" in r.stdout,
          f"exit {r.returncode}, {r.stdout.splitlines()[:1]}, {rows}")
    check("3: no shell ran the file name", not os.path.exists(os.path.join(tmp, "PWNED")) and
          not os.path.exists(os.path.join(folder, "PWNED")))
    expect_error("3: --llamacpp-model naming another model", nmkit(*common, "--llamacpp-model", other, cwd=tmp,
                                                                   env=env), "not the same model", "n_ff")


def compliant_24(w):
    groups = np.asarray(w).reshape(w.shape[0], -1, 4)
    return bool(((groups != 0).sum(axis=2) <= 2).all())


def item4_include_exclude(tmp, tiny_tensors):
    tiny = os.path.join(tmp, "tiny.gguf")
    out = os.path.join(tmp, "sel.gguf")
    expect_error("4: --exclude '.*' selects no linear", nmkit("prune", tiny, "-o", out, "--pattern", "2:4",
                                                               "--exclude", ".*"), "select none", absent=[out])
    expect_error("4: --include '(' is not a regex", nmkit("prune", tiny, "-o", out, "--pattern", "2:4",
                                                           "--include", "("), "--include", "not a valid regular",
                 absent=[out])
    # GGUF name for q, Hugging Face name for up.
    r = nmkit("prune", tiny, "-o", out, "--pattern", "2:4", "--include", r"attn_q|mlp\.up_proj")
    _, got, _ = read_gguf(out) if r.returncode == 0 else (None, {}, None)
    pruned = sorted(n for n in got if not np.array_equal(got[n], tiny_tensors[n]))
    want = sorted(f"blk.{b}.{x}.weight" for b in range(P["n_layer"]) for x in ("attn_q", "ffn_up"))
    check("4: --include 'attn_q|mlp\\.up_proj' prunes exactly q and up",
          r.returncode == 0 and pruned == want and all(compliant_24(got[n]) for n in want), f"changed {pruned}")


def item5_values(tmp, rng):
    def huge(t):
        t["blk.0.ffn_down.weight"][3, 17] = 70000.0
    src = os.path.join(tmp, "huge.gguf")
    write_model(src, rng, edit=huge)
    for cmd, where in ((["prune", src, "--pattern", "2:4"], "blk.0.ffn_down.weight"),
                       (["convert", src], "blk.0.ffn_down.weight")):
        out = os.path.join(tmp, "f16.gguf")
        expect_error(f"5: {cmd[0]} --dtype f16 of 70000", nmkit(*cmd, "-o", out, "--dtype", "f16"), where,
                     "[3, 17]", "70000", "F16", absent=[out], folder=tmp)
    out = os.path.join(tmp, "f16-hf")
    expect_error("5: convert to a folder --dtype f16 of 70000", nmkit("convert", src, "-o", out + "/", "--dtype", "f16"),
                 "model.layers.0.mlp.down_proj.weight", "70000", absent=[out], folder=tmp)
    check("5: --dtype bf16 holds it", nmkit("convert", src, "-o", os.path.join(tmp, "bf16.gguf"), "--dtype",
                                            "bf16").returncode == 0)
    text = os.path.join(tmp, "prose.txt")
    def nan(t):
        t["blk.0.ffn_up.weight"][2, 5] = float("nan")
    nan_model = os.path.join(tmp, "nan.gguf")
    write_model(nan_model, rng, edit=nan)
    # Pruned or quantized to int8 on load, the weight is not scanned first: pruning or quantization
    # names the value, by the part's own tensor where q/k/v or gate/up are stacked (ffn_up here).
    for extra in ([], ["--weights", "int8"], ["--pattern", "2:4", "--format", "sparse24"],
                  ["--pattern", "6:8", "--format", "nm", "--weights", "int8"],
                  ["--pattern", "2:4", "--format", "sparse24", "--weights", "int8"]):
        expect_error(f"5: eval of a NaN weight {' '.join(extra)}", nmkit("eval", nan_model, "--text", text, "--ctx", "64", *extra),
                     "blk.0.ffn_up.weight", "row 2, column 5 is nan")
    for key, kwargs in (("layer_norm_rms_epsilon", dict(rms_eps=float("inf"))),
                        ("rope.freq_base", dict(rope_base=float("inf")))):
        bad = os.path.join(tmp, "inf.gguf")
        write_model(bad, rng, **kwargs)
        expect_error(f"5: eval with {key} = inf", nmkit("eval", bad, "--text", text), key, "inf")
        expect_error(f"5: generate with {key} = inf", nmkit("generate", bad, "--prompt", "hi"), key, "inf")
    hf = os.path.join(tmp, "hf-inf")
    write_hf(hf, write_model(os.path.join(tmp, "plain.gguf"), rng))
    config = json.load(open(os.path.join(hf, "config.json")))
    config["rms_norm_eps"] = 1e39  # beyond float32: infinite when the model computes
    json.dump(config, open(os.path.join(hf, "config.json"), "w"))
    expect_error("5: an HF config with rms_norm_eps 1e39", nmkit("convert", hf, "-o", os.path.join(tmp, "x.gguf")),
                 "rms_norm_eps", "1e+39")


def item6_signals_and_races(tmp, smollm2):
    if smollm2 is None:
        print("SKIP: 6 (signals and races on SmolLM2): SmolLM2 cannot be fetched")
        return None
    def interrupt(label, signal_number, output, *args):
        """Sends the signal once the command's temporary appears: it must die by it, leaving neither
        the temporary nor the output."""
        p = subprocess.Popen([NMKIT, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None and not temporaries(tmp):
            time.sleep(0.01)
        seen = temporaries(tmp)
        p.send_signal(signal_number)
        p.wait()
        check(label, seen and p.returncode == -signal_number and not temporaries(tmp) and not os.path.exists(output),
              f"saw {seen}, exit {p.returncode}, left {temporaries(tmp)}")

    target = os.path.join(tmp, "signalled")
    interrupt("6: SIGINT during convert -o DIR/ leaves nothing", signal.SIGINT, target,
              "convert", smollm2, "-o", target + "/")
    report = os.path.join(tmp, "r.json")
    interrupt("6: SIGHUP during eval --json leaves nothing", signal.SIGHUP, report,
              "eval", smollm2, "--text", os.path.join(tmp, "prose.txt"), "--ctx", "64", "--json", report)
    # Two writers of one new folder at once: both succeed, the last complete one stays.
    target = os.path.join(tmp, "raced")
    procs = [subprocess.Popen([NMKIT, "convert", smollm2, "-o", target + "/", "--dtype", "bf16"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors = [p.communicate()[1].strip() for p in procs]
    check("6: two concurrent convert -o DIR/ to a new DIR both succeed",
          all(p.returncode == 0 for p in procs) and not temporaries(tmp) and
          sorted(os.listdir(target)) == ["config.json", "generation_config.json", "model.safetensors",
                                         "tokenizer.json", "tokenizer_config.json"],
          f"exits {[p.returncode for p in procs]} {errors}")
    return target


def item7_early_errors(tmp, tiny_tensors):
    tiny = os.path.join(tmp, "tiny.gguf")
    text = os.path.join(tmp, "prose.txt")
    for cmd in (["prune", tiny, "--pattern", "2:4"], ["convert", tiny]):
        expect_error(f"7: {cmd[0]} -o ''", nmkit(*cmd, "-o", ""), "-o: empty path", folder=tmp)
        out = os.path.join(tmp, "out.txt")
        expect_error(f"7: {cmd[0]} -o out.txt", nmkit(*cmd, "-o", out), "out.txt", "not a .gguf file or a folder",
                     absent=[out], folder=tmp)
    # A location that cannot be written fails before the pruning, not after it: here the calibration
    # text (too short for one sequence) would fail the pruning itself.
    short = os.path.join(tmp, "short.txt")
    open(short, "w").write("too short")
    out = os.path.join(tmp, "missing", "out.gguf")
    expect_error("7: an unwritable -o fails before the calibration",
                 nmkit("prune", tiny, "-o", out, "--pattern", "2:4", "--method", "wanda", "--calib", short, *CALIB),
                 "-o", "missing/out.gguf", "cannot create a temporary")
    # A file system too small for the tensors (a 64 KiB tmpfs; mounting needs root: SKIP otherwise).
    small = os.path.join(tmp, "small")
    os.makedirs(small)
    if run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", small]).returncode != 0:
        print("SKIP: 7 (a full file system): cannot mount a tmpfs here")
    else:
        try:
            out = os.path.join(small, "out.gguf")
            expect_error("7: a file system without room fails before the calibration",
                         nmkit("prune", tiny, "-o", out, "--pattern", "2:4", "--method", "wanda", "--calib", short,
                               *CALIB), "-o", "needs", "its file system has", absent=[out], folder=small)
        finally:
            run(["umount", small])
    expect_error("7: eval --text DIR/", nmkit("eval", tiny, "--text", tmp + "/"), "a folder, not a text file")
    # inspect of a Hugging Face folder lists its tensors (it said "starts with bytes []").
    hf = os.path.join(tmp, "hf2")
    r = nmkit("inspect", hf, "--json")
    names = [t["name"] for t in json.loads(r.stdout)["tensors"]] if r.returncode == 0 else []
    check("7: inspect of a sharded Hugging Face folder", r.returncode == 0 and len(names) == len(tiny_tensors)
          and "model.layers.1.mlp.down_proj.weight" in names, f"exit {r.returncode} {len(names)} tensors {r.stderr}")
    # A tensor count beyond the infos the file holds.
    data = bytearray(open(tiny, "rb").read())
    count = int.from_bytes(data[8:16], "little")
    data[8:16] = (count + 1).to_bytes(8, "little")
    lying = os.path.join(tmp, "lying.gguf")
    open(lying, "wb").write(data)
    expect_error("7: a GGUF tensor count one too high", nmkit("inspect", lying), f"tensor {count + 1} of {count + 1}")
    # The vocabulary: a model with fewer rows than the tokenizer has tokens is refused before the build,
    # naming the file; one with more generates only tokens that have text.
    rng = np.random.default_rng(7)
    small = os.path.join(tmp, "vocab200.gguf")
    write_model(small, rng, n_vocab=200)
    for cmd in (["eval", small, "--text", text, "--ctx", "64"], ["generate", small, "--prompt", "hi"]):
        expect_error(f"7: {cmd[0]} with a vocabulary smaller than the tokenizer", nmkit(*cmd), small,
                     "258 tokens", "200")
    large = os.path.join(tmp, "vocab300.gguf")
    write_model(large, rng, n_vocab=300)
    # A high temperature flattens the distribution: ids past the tokenizer's would come up often.
    r = subprocess.run([NMKIT, "generate", large, "--prompt", "hi", "-n", "48", "--temp", "50", "--seed", "5"],
                       capture_output=True, timeout=300)  # bytes: the tokens are single bytes, not UTF-8 text
    stderr = r.stderr.decode(errors="replace")
    generated = stderr.split("decode ")[1].split(" ")[0] if "decode " in stderr else "?"
    check("7: generate with a vocabulary larger than the tokenizer prints a byte per token",
          r.returncode == 0 and generated.isdigit() and len(r.stdout) - len(b"hi\n") >= int(generated),
          f"{generated} tokens, {len(r.stdout) - 3} bytes")
    # eval --chunks N tokenizes only what N chunks need: a 60 MB text evaluates like its first part.
    long_text = os.path.join(tmp, "long.txt")
    with open(long_text, "w") as f:
        f.write(PROSE * 100)
        f.write(PROSE * 300000)
    reports = []
    for i, path in enumerate((text, long_text)):
        report = os.path.join(tmp, f"ppl{i}.json")
        r = nmkit("eval", tiny, "--text", path, "--ctx", "64", "--chunks", "2", "--json", report)
        reports.append(json.load(open(report)) if r.returncode == 0 else {})
    ok = (reports[0].get("nll_sum") is not None and reports[0]["nll_sum"] == reports[1].get("nll_sum")
          and reports[1].get("text_tokenized_whole") is False
          and reports[1].get("text_bytes_tokenized", 1 << 40) < 4 << 20)
    check("7: eval --chunks 2 of a 60 MB text tokenizes a prefix, same result", ok,
          f"{[{k: r.get(k) for k in ('nll_sum', 'text_tokenized_whole', 'text_bytes_tokenized')} for r in reports]}")
    os.remove(long_text)


def gguf_tokenizer_keys(path):
    import gguf
    r = gguf.GGUFReader(path)
    return {k: f.contents() for k, f in r.fields.items() if k.startswith("tokenizer.")}


def item8_convert(tmp, tiny_tensors, smollm2, smollm2_hf):
    tiny = os.path.join(tmp, "tiny.gguf")
    hf = os.path.join(tmp, "tiny-hf")
    back = os.path.join(tmp, "back.gguf")
    ok = nmkit("convert", tiny, "-o", hf + "/").returncode == 0 and nmkit("convert", hf, "-o", back).returncode == 0
    _, got, _ = read_gguf(back) if ok else (None, {}, None)
    check("8: GGUF -> folder -> GGUF keeps every tensor bit for bit",
          ok and sorted(got) == sorted(tiny_tensors) and all(np.array_equal(got[n], tiny_tensors[n]) for n in got))
    check("8: ... and the tokenizer keys", ok and gguf_tokenizer_keys(back) == gguf_tokenizer_keys(tiny))
    half = os.path.join(tmp, "half.gguf")
    ok = nmkit("convert", tiny, "-o", half, "--dtype", "f16").returncode == 0
    _, got, _ = read_gguf(half) if ok else (None, {}, None)
    check("8: convert --dtype f16: matrices rounded to f16, norms f32", ok and all(
        np.array_equal(got[n], v.astype(np.float16).astype(np.float32) if v.ndim == 2 else v)
        for n, v in tiny_tensors.items()))
    out = os.path.join(tmp, "np.gguf")
    expect_error("8: prune without --pattern points to convert", nmkit("prune", tiny, "-o", out), "--pattern",
                 "nmkit convert", absent=[out])
    r = nmkit("--help")
    lines = {line.split()[0]: line for line in r.stdout.splitlines() if line.startswith("  ") and line.split()}
    check("8: --help lists convert; demo is make demo; prune takes models",
          "convert" in lines and "make demo" in lines.get("demo", "") and "make run" not in lines.get("demo", "")
          and "model" in lines.get("prune", ""), f"{lines.get('demo')} | {lines.get('prune')}")

    if smollm2 is None or smollm2_hf is None:
        print("SKIP: 8 (SmolLM2's folder as GGUF): SmolLM2 cannot be fetched")
        return
    # SmolLM2's Hugging Face folder (written by item 6) back to GGUF: the tokenizer in llama.cpp's form.
    back = os.path.join(tmp, "smollm2-back.gguf")
    r = nmkit("convert", smollm2_hf, "-o", back, "--dtype", "bf16")  # as the folder holds them
    keys, original = (gguf_tokenizer_keys(back), gguf_tokenizer_keys(smollm2)) if r.returncode == 0 else ({}, {})
    differ = sorted(k for k in set(original) | set(keys) if keys.get(k) != original.get(k))
    # add_space_prefix (SmolLM2's says false, which a gpt2 vocabulary ignores) is not written.
    check("8: SmolLM2 folder -> GGUF: tokenizer keys as the original's",
          r.returncode == 0 and differ == ["tokenizer.ggml.add_space_prefix"], f"differ: {differ} {r.stderr.strip()}")
    tokenize = os.path.join(LLAMACPP_BIN, "llama-tokenize")
    if not os.path.exists(tokenize):
        print(f"SKIP: 8 (llama.cpp reads the GGUF): {tokenize} is not built (scripts/build_llamacpp.sh)")
        return
    prompt = "The capital of France is Paris. 1234 naïve café\n<|im_start|>user"
    ids = [run([tokenize, "-m", m, "-p", prompt, "--ids", "--log-disable"]) for m in (back, smollm2)]
    check("8: llama-tokenize gives the same ids on the written GGUF",
          ids[0].returncode == 0 and ids[0].stdout.strip() == ids[1].stdout.strip() and ids[0].stdout.strip(),
          f"{ids[0].stdout.strip()[:80]} | {ids[1].stdout.strip()[:80]} {ids[0].stderr[-200:]}")
    perplexity = os.path.join(LLAMACPP_BIN, "llama-perplexity")
    if os.path.exists(perplexity):
        text = os.path.join(tmp, "prose.txt")
        # --fit off: no probing of device memory (10 s of the 36 on a CPU-only machine).
        r = run([perplexity, "-m", back, "-f", text, "-c", "64", "-b", "64", "--chunks", "2", "-t", "2", "--fit", "off"])
        report = os.path.join(tmp, "back.json")
        mine = nmkit("eval", back, "--text", text, "--ctx", "64", "--chunks", "2", "--weights", "bf16",
                     "--json", report)
        theirs = [float(m) for m in re.findall(r"Final estimate: PPL = ([0-9.]+)", r.stdout + r.stderr)]
        ours = json.load(open(report))["perplexity"] if mine.returncode == 0 else None
        check("8: llama-perplexity loads the written GGUF; perplexity within 1% of nmkit's",
              r.returncode == 0 and theirs and ours and abs(theirs[0] / ours - 1) < 0.01, f"{theirs} vs {ours}")


def main():
    global NMKIT
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmkit", required=True)
    NMKIT = os.path.abspath(ap.parse_args().nmkit)
    r = run(["bash", os.path.join(ROOT, "scripts", "fetch_model.sh")])
    smollm2 = os.path.join(ROOT, r.stdout.strip()) if r.returncode == 0 else None
    rng = np.random.default_rng(24)
    print("seed=24")
    with tempfile.TemporaryDirectory() as tmp:
        tiny_tensors = write_model(os.path.join(tmp, "tiny.gguf"), rng)
        with open(os.path.join(tmp, "prose.txt"), "w") as f:
            f.write(PROSE * 100)  # 18k byte tokens with the tiny vocabulary; 3.7k with SmolLM2's
        steps = [lambda: item1_data_loss(tmp, tiny_tensors), lambda: item2_allocation(tmp), lambda: item3_bench(tmp),
                 lambda: item4_include_exclude(tmp, tiny_tensors), lambda: item5_values(tmp, rng),
                 lambda: item6_signals_and_races(tmp, smollm2), lambda: item7_early_errors(tmp, tiny_tensors)]
        results = []
        for item, step in enumerate(steps, 1):
            start = time.time()
            results.append(step())
            print(f"-- item {item}: {time.time() - start:.1f} s")
        start = time.time()
        item8_convert(tmp, tiny_tensors, smollm2, results[5])  # item 6's SmolLM2 folder
        print(f"-- item 8: {time.time() - start:.1f} s")
    print("PASS" if not failures else f"FAILED: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
