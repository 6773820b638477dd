// What `nmkit eval`, `generate` and `bench model` share: opening a model (GGUF file or Hugging Face
// directory) into its parameters and tensor loader, and the weight-form options.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "nmkit/model.h"
#include "nmkit/tokenizer.h"
#include "nmkit/status.h"

namespace nmkit::cli {

// An opened model source (ModelSource: a GGUF file or a Hugging Face folder): parameters, its tensors
// by GGUF name, and (when the source has one) its tokenizer (load_tokenizer, which checks
// it against the model's vocabulary). Holds the file open.
struct OpenedModel {
  std::string path;
  LlamaParams params;
  ModelTensors tensors;
  std::shared_ptr<const Tokenizer> tokenizer;  // null when the source has none (tokenizer_error says why)
  std::string tokenizer_error;
  std::shared_ptr<void> keep_alive;  // the file or directory reader behind `load`
};
Result<OpenedModel> open_model(const std::string& path);

// --weights, --pattern, --method, --format.
struct WeightFlags {
  std::string weights = "f32";
  std::string pattern;
  std::string method = "magnitude";
  std::string format = "dense";
};
void add_weight_flags(CLI::App& app, WeightFlags& flags);
Result<ModelOptions> model_options(const WeightFlags& flags);
// "f32 dense", "bf16 2:4 sparse24", "int8 6:8 slid".
std::string describe(const ModelOptions& options);

// Builds the model, with "[b/n] building FORM" on a terminal. First `options` become the form the
// model runs (model_options_for: a packed model file's own), then a model that cannot fit in the
// memory left, with a KV cache of n_ctx tokens, is an Error ("needs at least N GB, M GB available").
Result<LlamaModel> build_model(const OpenedModel& source, ModelOptions& options, int64_t n_ctx = 0);
// --dtype of a written model: f32, f16 or bf16 (an Error naming the flag otherwise).
Result<DType> parse_output_dtype(const std::string& text);
// The source's tokenizer, or an Error naming the model.
Result<std::shared_ptr<const Tokenizer>> require_tokenizer(const OpenedModel& source);

}  // namespace nmkit::cli
