// `nmkit bench model`: decode and prefill speed of a llama model on nmkit's kernels in every weight
// form (f32, bf16, int8; dense, 2:4 sparse24, 6:8), in interleaved rounds, next to llama.cpp's
// llama-bench on GGUF files of the same model when its binaries are built (docs/design.md 13).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nmkit/model.h"

namespace nmkit::bench {

struct ModelVariant {
  std::string label;  // "f32 dense", "int8 6:8 nm"
  ModelOptions options;
};

// f32, bf16 and int8, each dense, 2:4 sparse24 and 6:8 (nm for f32/bf16, slid for int8).
std::vector<ModelVariant> default_model_variants();

struct LlamaCppFile {
  std::string label;  // "F32", "BF16", "Q8_0"
  std::string path;
};

struct ModelBenchOptions {
  std::string model_label;
  // Builds the model with the given options (the caller holds the source tensors).
  std::function<Result<LlamaModel>(const ModelOptions&)> build;
  std::vector<ModelVariant> variants = default_model_variants();
  int rounds = 3;
  int64_t decode_tokens = 128;   // generated after a short prompt (llama-bench tg128)
  int64_t prompt_tokens = 8;     // the short prompt before decode
  int64_t prefill_tokens = 512;  // one batched prompt (llama-bench pp512)
  std::string llama_bench;       // path of llama-bench, empty: no llama.cpp rows
  std::vector<LlamaCppFile> llamacpp_files;
  int llamacpp_threads = 2;
  std::string json_path;
  // Build, time and free each form before the next (its load time and peak RSS then its own), instead
  // of holding every form at once and interleaving their rounds (same-round ratios, robust to a
  // drifting machine). What a model too large for all its forms at once needs
  // (forms_fit_at_once).
  bool one_at_a_time = false;
};

// Whether every variant of a model with `params` fits in memory at once: their dense weight bytes
// (an upper bound on every form's) below half of the available memory.
bool forms_fit_at_once(const LlamaParams& params, const std::vector<ModelVariant>& variants);

// Prints the table (and writes JSON); returns the process exit code.
int run_model_bench(const ModelBenchOptions& options);

// Tokens/s of `decode` greedy one-token steps after a prompt of prompt_n tokens (session: a context
// of at least prompt_n + decode), and of one batched prefill of n tokens. Prompts are fixed
// pseudo-random ids (speed does not depend on which tokens run).
Result<double> measure_decode(const LlamaModel& model, LlamaSession& session, int64_t prompt_n, int64_t decode);
Result<double> measure_prefill(const LlamaModel& model, LlamaSession& session, int64_t n);

}  // namespace nmkit::bench
