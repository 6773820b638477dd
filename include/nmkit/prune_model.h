// Pruning a whole llama model from its file (docs/design.md 11.5 and 12): open it, prune every block
// linear (calibrated block by block on a text for wanda, sparsegpt and admm), and write the result as GGUF,
// a Hugging Face folder or safetensors. What `nmkit prune MODEL` and Python's nmkit.prune_model run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "nmkit/calib_model.h"
#include "nmkit/dtype.h"
#include "nmkit/model.h"
#include "nmkit/model_source.h"
#include "nmkit/status.h"
#include "nmkit/tokenizer.h"

namespace nmkit {

struct CalibTextOptions {
  CalibMethod method = CalibMethod::SparseGpt;
  Pattern pattern;
  // The calibration text (UTF-8): needed by wanda, sparsegpt and admm, and by any method with refit_steps.
  std::string text_path;
  int64_t n_seq = 64;     // calibration sequences...
  int64_t seq_len = 256;  // ...of this many tokens, windows spread over the text
  int refit_steps = 0;    // CalibOptions::refit_steps
  AdmmOptions admm;       // CalibOptions::admm
  bool output_error = true;  // CalibOptions::output_error
  // CalibOptions::wanda_error_tokens: Wanda's output-error report costs a Hessian of these tokens.
  int64_t wanda_error_tokens = 2048;
  // prune_model only: the weights the calibration passes run with (F32, BF16 or I8; design.md 12).
  // The pruned weights come from the file's either way.
  DType pass_weights = DType::F32;
  CalibLinearFormat format = CalibLinearFormat::Dense;  // the form pruned linears take in the model
  std::function<void(int64_t b, int64_t n_layer)> on_block;  // after each block
};

struct CalibRun {
  CalibReport report;
  std::string text_path;    // "" when no text was needed
  int64_t text_tokens = 0;  // tokens of the whole text
};

// Reads and tokenizes the calibration text (when the method needs one), cuts the sequences
// (calibration_sequences) and prunes `model` in place (built with keep_dense_weights). Errors: a
// missing or non-UTF-8 text, sequence sizes below 1 or above the model's context, a text shorter
// than one sequence, and calibrate_and_prune's.
Result<CalibRun> calibrate_model(LlamaModel& model, const Tokenizer* tokenizer, const CalibTextOptions& options);

// A model file opened and pruned, ready to be written.
struct PrunedModel {
  ModelSource source;
  LlamaModel model;
  CalibRun run;
};

// Whether `output` is a form prune_model can write for `input` (before any long work): .gguf, a
// folder (DIR or DIR/, absent or holding only what write_model_hf writes), or .safetensors for a
// Hugging Face folder only. The Error names `output`.
Status check_pruned_model_output(const std::string& input, const std::string& output);

// Opens `input` (a GGUF file or a Hugging Face folder), builds it with its dense weights kept and
// prunes it (calibrate_model).
Result<PrunedModel> prune_model(const std::string& input, const CalibTextOptions& options);

// Writes the pruned model, by the form of `output`, its tensors converted to `dtype` (F32, F16, BF16):
//   OUT.gguf         GGUF (a GGUF source: its metadata and tensor order, general.file_type set);
//   OUT (a folder)   a Hugging Face llama folder (write_model_hf; any source);
//   OUT.safetensors  a Hugging Face source only: the weights under its own names and row order.
// Atomic; on_tensor(i, n, name) before each tensor is written.
Status write_pruned_model(const PrunedModel& pruned, const std::string& output, DType dtype,
                          const std::function<void(size_t i, size_t n, const std::string& name)>& on_tensor = {});

}  // namespace nmkit
