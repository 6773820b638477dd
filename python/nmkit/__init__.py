"""nmkit: N:M structured sparsity of LLM weights, from Python.

The package is nmkit's C++ library bound with nanobind (no second implementation): prune, compress,
slide and quantize arrays; run sparse linear layers; read and write safetensors; load, evaluate,
generate with and prune whole llama models. Arrays (numpy float32/float16/int8..., torch CPU tensors
including bfloat16) are read in place without copying; results come back as numpy arrays, or torch
tensors when a torch tensor came in. Long calls release the GIL, report progress through an optional
callback ``progress(stage, done, total)`` and stop on Ctrl-C with nothing written. Every error is an
nmkit.Error (a ValueError or OSError too) whose message names the file, tensor and value.
"""

from __future__ import annotations

import json as _json
import os as _os
from typing import Any

from ._errors import (Error, InvalidArgumentError, InvalidFileError, InvalidValueError, IoError, LimitError,
                      NotFoundError, SameFileError, UnsupportedError)
from ._nmkit import (Compressed, ErrorCode, LinearReport, Model, PerplexityResult, PruneMetrics, PruneModelReport,
                     PruneResult, SlideGeometry, SlidWeight, SparseLinear, compress, decompress, lift,
                     load_safetensors, pack_model, prune, prune_model, quantize, save_safetensors, slide, thread_count)
from ._nmkit import _inspect_json

# The GPU path (nmkit._cuda, built where nvcc was): absent without it, and unusable where the CUDA
# runtime libraries it links are not on the loader's path; CPU users never need it.
try:
    from ._cuda import CudaSparseLinear, cuda_device_count
except ImportError:
    pass


def inspect(path: str | _os.PathLike) -> list[dict[str, Any]]:
    """The rows `nmkit inspect PATH --json` prints, one dict per tensor of a safetensors or GGUF file:
    name, dtype, shape, format and pattern (nmkit's record, else None), zeros, zero_fraction,
    sparsest_pattern (the sparsest N:M pattern a 2-D float tensor complies with), complies_with_pattern,
    parts and stored_bytes (and slid for SlideSparse weights)."""
    return _json.loads(_inspect_json(path))["tensors"]


__all__ = [
    "Compressed", "Error", "ErrorCode", "InvalidArgumentError", "InvalidFileError", "InvalidValueError", "IoError",
    "LimitError", "LinearReport", "Model", "NotFoundError", "PerplexityResult", "PruneMetrics", "PruneModelReport",
    "PruneResult", "SameFileError", "SlideGeometry", "SlidWeight", "SparseLinear", "UnsupportedError", "compress",
    "decompress", "inspect", "lift", "load_safetensors", "pack_model", "prune", "prune_model", "quantize",
    "save_safetensors", "slide", "thread_count",
]
if "CudaSparseLinear" in globals():
    __all__ += ["CudaSparseLinear", "cuda_device_count"]
