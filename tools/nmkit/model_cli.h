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

// An opened model source (ModelSource: a GGUF file or a Hugging Face folder): parameters, a loader of
// f32 tensors by GGUF name, and (when the source has one) its tokenizer, checked against the model's
// vocabulary (check_vocabulary). Holds the file open.
struct OpenedModel {
  std::string path;
  LlamaParams params;
  TensorLoader load;
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

// Makes source.load remember every tensor it gave (f32), so that several models built from one source
// (sweep, bench model) read and dequantize the file once.
void cache_tensors(OpenedModel& source);

// Builds the model, with "[b/n] building FORM" on a terminal. First, a model that cannot fit in the
// memory left, with a KV cache of n_ctx tokens, is an Error ("needs at least N GB, M GB available").
Result<LlamaModel> build_model(const OpenedModel& source, ModelOptions options, int64_t n_ctx = 0);
// The source's tokenizer, or an Error naming the model.
Result<std::shared_ptr<const Tokenizer>> require_tokenizer(const OpenedModel& source);

// A tokenizer with more tokens than the model's vocabulary (token_embd rows) would feed the model ids
// it has no row for: an Error naming the model and both counts, before anything is built. Fewer is
// allowed (vocabularies padded to a multiple of 64, say); generate samples only the tokenizer's ids.
Status check_vocabulary(const std::string& model_path, const Tokenizer& tokenizer, const LlamaParams& params);

}  // namespace nmkit::cli
