#!/usr/bin/env python3
"""scripts/accuracy_chart.py on a tiny made-up run (no model, a few seconds): every point lands on
both panels at its own coordinates with its own marker, colour and fill, the perplexity axis is
logarithmic, the table lists every point with the right ratio to dense, PNG and SVG are written,
and bad input is one line and a non-zero exit with nothing written. Skipped without matplotlib
(`make accuracy` installs it; `make test` does not)."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "accuracy_chart.py")

if importlib.util.find_spec("matplotlib") is None:
    print("SKIP: matplotlib is not installed (make accuracy installs it)")
    sys.exit(0)

spec = importlib.util.spec_from_file_location("accuracy_chart", SCRIPT)
chart = importlib.util.module_from_spec(spec)
spec.loader.exec_module(chart)

NMKIT = {"model": "m.gguf", "ctx": 512, "chunks": 4, "points": [
    {"name": "f32 dense", "pattern": "dense", "method": "-", "weights": "f32", "format": "dense",
     "perplexity": 20.0, "weight_bytes": 400e6, "decode_tps": 50.0},
    {"name": "int8 dense", "pattern": "dense", "method": "-", "weights": "int8", "format": "dense",
     "perplexity": 21.0, "weight_bytes": 100e6, "decode_tps": 150.0},
    {"name": "sparsegpt f32 6:8 nm", "pattern": "6:8", "method": "sparsegpt", "weights": "f32", "format": "nm",
     "perplexity": 22.0, "weight_bytes": 330e6, "decode_tps": 60.0},
    {"name": "admm int8 2:4 sparse24", "pattern": "2:4", "method": "admm", "weights": "int8",
     "format": "sparse24", "perplexity": 50.0, "weight_bytes": 70e6, "decode_tps": 200.0},
    {"name": "wanda bf16 6:8 nm", "pattern": "6:8", "method": "wanda", "weights": "bf16", "format": "nm",
     "perplexity": 24.0, "weight_bytes": 170e6, "decode_tps": None}]}
LLAMA = {"ctx": 512, "chunks": 4, "points": [
    {"name": "llama.cpp Q4_0", "quant": "Q4_0", "model": "/x/m.Q4_0.gguf", "perplexity_llamacpp": 30.0,
     "perplexity": 29.0, "weight_bytes": 80e6}]}
SPEED = [{"model_filename": "/y/m.Q4_0.gguf", "n_prompt": 0, "n_gen": 128, "avg_ts": 120.0},
         {"model_filename": "/y/m.Q4_0.gguf", "n_prompt": 512, "n_gen": 0, "avg_ts": 999.0},
         {"model_filename": "/y/m.F32.gguf", "n_prompt": 0, "n_gen": 128, "avg_ts": 40.0}]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


with tempfile.TemporaryDirectory() as tmp:
    paths = {}
    for name, doc in (("nmkit", NMKIT), ("llama", LLAMA), ("speed", SPEED)):
        paths[name] = os.path.join(tmp, name + ".json")
        with open(paths[name], "w") as f:
            json.dump(doc, f)
    out = os.path.join(tmp, "chart")
    p = subprocess.run([sys.executable, SCRIPT, "--nmkit", paths["nmkit"], "--llamacpp", paths["llama"],
                        "--llamacpp-speed", paths["speed"], "--out", out], capture_output=True, text=True)
    check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
    rows = [line for line in p.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    check(len(rows) == 6, f"table rows {rows}")
    # nmkit's ratio to dense; llama.cpp's row: nmkit eval's figure, llama.cpp's, its llama-bench decode.
    check(any(r.startswith("| sparsegpt f32 6:8 nm | sparse | 22.000 | 1.100 |") for r in rows), f"rows {rows}")
    check(any(r.startswith("| admm int8 2:4 sparse24 | sparse + quantized |") for r in rows), f"rows {rows}")
    check("| llama.cpp Q4_0 | quantized | 29.000 | 1.450 | 30.000 | 120.0 | 80.0 |" in rows, f"rows {rows}")
    check("m.F32.gguf (no perplexity point): decode 40.0" in p.stdout, f"stdout {p.stdout}")
    with open(out + ".png", "rb") as f:
        check(f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG")
    with open(out + ".svg") as f:
        check("<svg" in f.read(2000), "not an SVG")
    check(sorted(os.listdir(tmp)) == ["chart.png", "chart.svg", "llama.json", "nmkit.json", "speed.json"],
          f"files {os.listdir(tmp)}")

    # The figure itself: each point on both panels (the speed panel skips one without a speed).
    _, points = chart.load_nmkit(paths["nmkit"])
    _, lpoints, _ = chart.load_llamacpp(paths["llama"], paths["speed"])
    fig = chart.figure(points + lpoints, 20.0, "t")
    speed_ax, size_ax = fig.axes[:2]
    for ax, attr in ((speed_ax, "decode_tps"), (size_ax, "megabytes")):
        check(ax.get_yscale() == "log", f"{attr}: y scale {ax.get_yscale()}")
        drawn = {line.get_gid(): line for line in ax.get_lines() if line.get_gid()}
        for pt in points + lpoints:
            x = getattr(pt, attr)
            if x is None:
                check(pt.name not in drawn, f"{attr}: {pt.name} drawn without a value")
                continue
            line = drawn.get(pt.name)
            check(line is not None, f"{attr}: {pt.name} not drawn")
            if line is None:
                continue
            check(list(line.get_xdata()) == [x] and list(line.get_ydata()) == [pt.perplexity],
                  f"{attr}: {pt.name} at {line.get_xdata()}, {line.get_ydata()}")
            check(line.get_marker() == chart.PATTERN_MARKERS[pt.pattern], f"{pt.name}: marker {line.get_marker()}")
            check(line.get_color() == chart.METHOD_COLOURS[pt.method], f"{pt.name}: colour {line.get_color()}")
            hollow = line.get_markerfacecolor() == "none"
            check(hollow == (pt.weights == "f32"), f"{pt.name}: hollow {hollow}")
            check((line.get_fillstyle() == "left") == (pt.weights == "bf16"), f"{pt.name}: fill {line.get_fillstyle()}")
    check(speed_ax.get_ylabel().startswith("perplexity"), f"y label {speed_ax.get_ylabel()}")
    check("tokens/s" in speed_ax.get_xlabel() and "MB" in size_ax.get_xlabel(), "x labels")

    # Bad input: one line on stderr, exit 1, nothing written.
    bad = dict(NMKIT, points=[dict(NMKIT["points"][0], perplexity=float("nan"))])
    with open(paths["nmkit"], "w") as f:
        json.dump(bad, f)
    out2 = os.path.join(tmp, "bad")
    for argv, wanted in (([], "perplexity nan"),
                         (["--llamacpp", paths["llama"]], "perplexity nan")):
        p = subprocess.run([sys.executable, SCRIPT, "--nmkit", paths["nmkit"], "--out", out2] + argv,
                           capture_output=True, text=True)
        check(p.returncode == 1 and p.stderr.count("\n") == 1 and wanted in p.stderr and
              not os.path.exists(out2 + ".png"), f"bad input: exit {p.returncode}, stderr {p.stderr!r}")
    with open(paths["nmkit"], "w") as f:
        json.dump(dict(NMKIT, chunks=8), f)
    p = subprocess.run([sys.executable, SCRIPT, "--nmkit", paths["nmkit"], "--llamacpp", paths["llama"]],
                       capture_output=True, text=True)
    check(p.returncode == 1 and "chunks/ctx 4/512 differ" in p.stderr, f"chunks mismatch: {p.stderr!r}")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("accuracy_chart: ok")
