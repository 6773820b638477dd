#!/usr/bin/env python3
"""The chart of issue 28: perplexity against decode speed and against the bytes of the weights, one
point per form of the model, nmkit's pruned and quantized forms next to llama.cpp's quantizations.

Inputs (what `make accuracy` writes):
  --nmkit FILE       `nmkit bench accuracy --json`: its "points" (form, perplexity, decode_tps,
                     weight_bytes; every form evaluated as itself, decode timed after every perplexity)
  --llamacpp FILE    `scripts/bench_models.sh quant-perplexity`: llama.cpp's quantizations, each with
                     llama-perplexity's figure (perplexity_llamacpp), nmkit eval's of the same weights
                     dequantized (perplexity) and the bytes of the file's tensors
  --llamacpp-speed FILE  `scripts/bench_models.sh quant-speed`: llama-bench -o json (tg = decode)
Outputs: the table in Markdown on stdout, and OUT.png and OUT.svg (--out OUT). The chart plots
llama.cpp's points at llama.cpp's own perplexity (the figure its users get at that speed).

Encoding: colour = how the mask was chosen (dense, magnitude, Wanda, SparseGPT, ADMM) or llama.cpp;
marker = sparsity pattern (square dense, circle 6:8, diamond 4:8, triangle 2:4, cross llama.cpp);
filled = quantized weights (int8, bf16 half-filled; llama.cpp's are all quantized), hollow = f32.
"""
import argparse
import json
import math
import os
import sys

METHOD_COLOURS = {"-": "black", "magnitude": "tab:gray", "wanda": "tab:orange", "sparsegpt": "tab:blue",
                  "admm": "tab:green", "llama.cpp": "tab:red"}
METHOD_LABELS = {"-": "dense (no pruning)", "magnitude": "magnitude", "wanda": "Wanda", "sparsegpt": "SparseGPT",
                 "admm": "ADMM", "llama.cpp": "llama.cpp quantization"}
PATTERN_MARKERS = {"dense": "s", "6:8": "o", "4:8": "D", "2:4": "^", "1:4": "v", "llama.cpp": "X"}


class Point:
    def __init__(self, name, source, pattern, method, weights, perplexity, decode_tps, weight_bytes,
                 perplexity_other=None):
        self.name, self.source, self.pattern, self.method = name, source, pattern, method
        self.weights, self.perplexity, self.decode_tps, self.weight_bytes = weights, perplexity, decode_tps, weight_bytes
        self.perplexity_other = perplexity_other  # llama.cpp points: nmkit eval of the dequantized weights

    @property
    def megabytes(self):
        return self.weight_bytes / 1e6

    def kind(self):
        """'dense', 'quantized', 'sparse' or 'sparse + quantized' (the reader's question)."""
        sparse = self.pattern not in ("dense", "llama.cpp")
        quantized = self.weights != "f32"
        return {(False, False): "dense", (False, True): "quantized", (True, False): "sparse",
                (True, True): "sparse + quantized"}[(sparse, quantized)]


def _check(cond, what):
    if not cond:
        raise ValueError(what)


def load_nmkit(path):
    with open(path) as f:
        doc = json.load(f)
    _check(isinstance(doc.get("points"), list), f"{path}: no 'points' list (nmkit bench accuracy --json)")
    points = []
    for p in doc["points"]:
        for key in ("name", "pattern", "method", "weights", "perplexity", "weight_bytes"):
            _check(key in p, f"{path}: point {p.get('name', '?')} has no '{key}'")
        _check(p["perplexity"] > 0 and math.isfinite(p["perplexity"]), f"{path}: {p['name']}: perplexity {p['perplexity']}")
        points.append(Point(p["name"], "nmkit", p["pattern"], p["method"], p["weights"], p["perplexity"],
                            p.get("decode_tps"), p["weight_bytes"]))
    return doc, points


def load_llamacpp(path, speed_path=None):
    with open(path) as f:
        doc = json.load(f)
    speeds = {}
    if speed_path:
        with open(speed_path) as f:
            for run in json.load(f):  # llama-bench -o json: one record per model and test
                if run.get("n_gen", 0) > 0 and run.get("n_prompt", 0) == 0:
                    speeds[os.path.basename(run["model_filename"])] = run["avg_ts"]
    points = []
    for p in doc["points"]:
        _check(p["perplexity_llamacpp"] > 0, f"{path}: {p['name']}: perplexity {p['perplexity_llamacpp']}")
        points.append(Point(p["name"], "llama.cpp", "llama.cpp", "llama.cpp", p["quant"], p["perplexity_llamacpp"],
                            speeds.get(os.path.basename(p["model"])), p["weight_bytes"], p.get("perplexity")))
    # llama-bench's F32 run (no perplexity point): llama.cpp's dense speed, for the table only.
    reference = {name: tps for name, tps in speeds.items() if name.endswith(".F32.gguf")}
    return doc, points, reference


def short_label(p):
    if p.source == "llama.cpp":
        return p.weights
    if p.method == "-":
        return f"dense {p.weights}"
    return f"{ {'magnitude': 'mag', 'sparsegpt': 'SGPT', 'wanda': 'Wanda', 'admm': 'ADMM'}.get(p.method, p.method)} " \
           f"{p.pattern} {p.weights}"


def table(points, dense_ppl):
    lines = ["| form | kind | perplexity | x dense | llama.cpp perplexity | decode tok/s | weights MB |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in points:
        nm = f"{p.perplexity_other:.3f}" if p.perplexity_other is not None else ""
        ppl, ll = (nm, f"{p.perplexity:.3f}") if p.source == "llama.cpp" else (f"{p.perplexity:.3f}", "")
        ref = p.perplexity_other if p.source == "llama.cpp" else p.perplexity
        ratio = f"{ref / dense_ppl:.3f}" if ref else ""
        tps = f"{p.decode_tps:.1f}" if p.decode_tps else "-"
        lines.append(f"| {p.name} | {p.kind()} | {ppl} | {ratio} | {ll} | {tps} | {p.megabytes:.1f} |")
    return "\n".join(lines) + "\n"


def figure(points, dense_ppl, title, threads=2):
    """The figure (two panels sharing the log perplexity axis); returned for the caller to save."""
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(1, 2, figsize=(13, 7), sharey=True)
    panels = [("decode_tps", f"decode tokens/s ({threads} thread{'s' if threads != 1 else ''}; higher is better)"),
              ("megabytes", "MB of weights (lower is better)")]
    for ax, (attr, label) in zip(axes, panels):
        for p in points:
            x = getattr(p, attr)
            if x is None:
                continue
            colour = METHOD_COLOURS.get(p.method, "tab:purple")
            fill = {"f32": "none", "bf16": "left"}.get(p.weights, "full")
            ax.plot([x], [p.perplexity], linestyle="none", marker=PATTERN_MARKERS.get(p.pattern, "*"),
                    markersize=9, color=colour, markerfacecolor="none" if fill == "none" else colour,
                    fillstyle="full" if fill == "none" else fill, markerfacecoloralt="white", gid=p.name)
            if p.perplexity < 3 * dense_ppl:  # labels where the points crowd near dense
                ax.annotate(short_label(p), (x, p.perplexity), textcoords="offset points", xytext=(6, -3),
                            fontsize=6, color=colour)
        ax.axhline(dense_ppl, color="black", linewidth=0.6, linestyle=":")
        ax.set_yscale("log")
        plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")  # 24, not 2.4 x 10^1
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.set_xlabel(label)
        ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    axes[0].set_ylabel("perplexity (log scale; lower is better)")
    methods = [m for m in METHOD_COLOURS if any(p.method == m for p in points)]
    colour_handles = [Line2D([], [], linestyle="none", marker="o", color=METHOD_COLOURS[m], label=METHOD_LABELS[m])
                      for m in methods]
    patterns = [k for k in PATTERN_MARKERS if any(p.pattern == k for p in points)]
    marker_handles = [Line2D([], [], linestyle="none", marker=PATTERN_MARKERS[k], color="black", markerfacecolor="none",
                             label="llama.cpp (GGUF type)" if k == "llama.cpp" else k) for k in patterns]
    marker_handles += [Line2D([], [], linestyle="none", marker="o", color="black", markerfacecolor="none", label="f32 (hollow)"),
                       Line2D([], [], linestyle="none", marker="o", color="black", fillstyle="left",
                              markerfacecoloralt="white", label="bf16 (half)"),
                       Line2D([], [], linestyle="none", marker="o", color="black", label="int8 / quantized (filled)")]
    # Both legends below the panels, where they hide no point.
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.legend(handles=colour_handles, title="mask chosen by (colour)", fontsize=8, title_fontsize=8,
               loc="lower left", bbox_to_anchor=(0.06, 0.0), ncol=3)
    fig.legend(handles=marker_handles, title="pattern (marker), weights (fill)", fontsize=8, title_fontsize=8,
               loc="lower right", bbox_to_anchor=(0.98, 0.0), ncol=4)
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nmkit", required=True)
    ap.add_argument("--llamacpp")
    ap.add_argument("--llamacpp-speed")
    ap.add_argument("--out", help="write OUT.png and OUT.svg")
    ap.add_argument("--title", default="")
    args = ap.parse_args(argv)
    try:
        doc, points = load_nmkit(args.nmkit)
        reference = {}
        if args.llamacpp:
            ldoc, lpoints, reference = load_llamacpp(args.llamacpp, args.llamacpp_speed)
            _check(ldoc.get("chunks") == doc.get("chunks") and ldoc.get("ctx") == doc.get("ctx"),
                   f"{args.llamacpp}: chunks/ctx {ldoc.get('chunks')}/{ldoc.get('ctx')} differ from "
                   f"{args.nmkit}'s {doc.get('chunks')}/{doc.get('ctx')}")
            points += lpoints
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"accuracy_chart: {e}")
    dense = [p for p in points if p.source == "nmkit" and p.pattern == "dense" and p.weights == "f32"]
    if not dense:
        sys.exit(f"accuracy_chart: {args.nmkit}: no dense f32 point")
    dense_ppl = dense[0].perplexity
    if doc.get("complete") is False:
        print(f"({args.nmkit} is a partial run: the rows it holds, no decode timings)\n")
    sys.stdout.write(table(points, dense_ppl))
    for name, tps in reference.items():
        print(f"\nllama.cpp {name} (no perplexity point): decode {tps:.1f} tok/s in the same llama-bench run")
    if args.out:
        title = args.title or (f"{os.path.basename(doc.get('model', ''))}: perplexity (ctx {doc.get('ctx')}, "
                               f"{doc.get('chunks')} chunks) against decode speed and size" +
                               (" (partial run)" if doc.get("complete") is False else ""))
        fig = figure(points, dense_ppl, title, doc.get("threads", 2))
        for ext in ("png", "svg"):
            tmp = f"{args.out}.tmp.{ext}"
            fig.savefig(tmp, dpi=120, format=ext, metadata={"Date": None} if ext == "svg" else None)
            os.replace(tmp, f"{args.out}.{ext}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
