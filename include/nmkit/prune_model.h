// Pruning a whole llama model from its file (docs/design.md 11.5 and 12): open it, prune every block
// linear (calibrated block by block on a text for wanda, sparsegpt and admm), and write the result as GGUF,
// a Hugging Face folder or safetensors. What `nmkit prune MODEL` and Python's nmkit.prune_model run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/calib_model.h"
#include "nmkit/dtype.h"
#include "nmkit/files.h"
#include "nmkit/model.h"
#include "nmkit/model_source.h"
#include "nmkit/status.h"
#include "nmkit/tokenizer.h"

namespace nmkit {

struct CalibTextOptions {
  CalibMethod method = CalibMethod::SparseGpt;
  Pattern pattern;
  // The calibration text (UTF-8): needed by wanda, sparsegpt and admm, and by any method with refit_steps or swaps.
  std::string text_path;
  int64_t n_seq = 64;     // calibration sequences...
  int64_t seq_len = 256;  // ...of this many tokens, windows spread over the text
  int refit_steps = 0;    // CalibOptions::refit_steps
  bool swaps = false;     // CalibOptions::swaps
  double dense_targets = 0;  // CalibOptions::dense_targets (0: off)
  AdmmOptions admm;       // CalibOptions::admm
  bool output_error = true;  // CalibOptions::output_error
  // CalibOptions::wanda_error_tokens: Wanda's output-error report costs a Hessian of these tokens.
  int64_t wanda_error_tokens = 2048;
  // prune_model_to only: the weights the calibration passes run with (F32, BF16 or I8; design.md 12);
  // unset: BF16 for Wanda, for the other methods the file's where it stores every block linear F32 or
  // BF16 (read in place, no copy), else F32. The pruned weights come from the file's either way.
  std::optional<DType> pass_weights;
  CalibLinearFormat format = CalibLinearFormat::Dense;  // the form pruned linears take in the model
  bool permute = false;  // CalibOptions::permute (magnitude then builds the model as the others do)
  bool permute_inputs = false;  // CalibOptions::permute_inputs (a measurement: dense models only)
  // Which block linears to prune, by GGUF name (blk.B.attn_q.weight); unset: all of them. The others
  // are written as they are (CalibOptions::selected; needs format Dense).
  std::function<bool(std::string_view name)> selected;
  std::function<void(int64_t b, int64_t n_layer)> on_block;  // after each block
};

struct CalibRun {
  CalibReport report;
  std::string text_path;    // "" when no text was needed
  int64_t text_tokens = 0;  // tokens of the whole text
};

// Reads and tokenizes the calibration text (when the method needs one; a regular file only, its
// UTF-8 checked as it is read: nmkit/text_file.h), cuts the sequences (calibration_sequences) and
// prunes `model` in place (its dense weights are read from its source as needed). Errors: a missing, non-regular or
// non-UTF-8 text, sequence sizes below 1 or above the model's context, a text shorter than one
// sequence, and calibrate_and_prune's.
Result<CalibRun> calibrate_model(LlamaModel& model, const Tokenizer* tokenizer, const CalibTextOptions& options);

// Whether `output` is a form prune_model_to can write for `input`, checked before any long work
// (parse_model_output and check_model_output, include/nmkit/model_write.h): .gguf, a folder (DIR or
// DIR/, absent or holding only what write_model_hf writes, and holding no input), or .safetensors for
// a Hugging Face folder only; never a file the input reads (a folder's weights, shards, config,
// tokenizer) nor one of `other_inputs` (the calibration text) or `other_outputs`; in a writable
// folder with room for the tensors in `dtype`. The Error names `output` (as `label` calls it).
Status check_pruned_model_output(const std::string& input, const std::string& output, DType dtype = DType::F32,
                                 const std::vector<FileRole>& other_inputs = {},
                                 const std::vector<FileRole>& other_outputs = {},
                                 const std::string& label = "output");

// Opens `input` (a GGUF file or a Hugging Face folder), prunes every block linear by `options` and
// writes the result to `output` as it goes (docs/design.md 12, "Pruning a model file"): wanda and
// sparsegpt run the model block by block (ModelCalibrator) on a model built in the file's dtype where
// it is F32 or BF16 (read in place), else f32, with no dense copy of its weights (a model that cannot
// fit in the memory left is refused first, naming `input`); the writer pulls each block's pruned
// linears as it reaches them, holding only the blocks its tensor order takes ahead; magnitude prunes
// each linear from the file as it is written. Written by the form of `output` (parse_model_output),
// 2-D tensors converted to `dtype` (F32, F16, BF16; a value the dtype cannot hold is an Error naming
// tensor, element and value):
//   OUT.gguf         GGUF (a GGUF source: its metadata and tensor order, general.file_type set; a
//                    Hugging Face source: its parameters and tokenizer as llama.cpp's converter writes them);
//   OUT (a folder)   a Hugging Face llama folder (write_model_hf; any source);
//   OUT.safetensors  a Hugging Face source only: the weights under its own names and row order.
// Atomic: on_tensor(i, n, name) before each tensor is written; before_commit(run), once every linear
// is pruned and the report is complete but before the output is renamed into place (an Error from
// it leaves nothing written). Returns the run's report.
Result<CalibRun> prune_model_to(const std::string& input, const std::string& output, const CalibTextOptions& options,
                                DType dtype = DType::F32,
                                const std::function<void(size_t i, size_t n, const std::string& name)>& on_tensor = {},
                                const std::function<Status(const CalibRun& run)>& before_commit = {});

}  // namespace nmkit
