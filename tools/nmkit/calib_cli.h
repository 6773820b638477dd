// What `nmkit prune MODEL`, `nmkit eval --method` and `nmkit bench accuracy` share for calibrated
// pruning (docs/design.md section 12): the calibration flags, the calibration text, and the report.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "nmkit/calib_model.h"
#include "nmkit/model.h"
#include "nmkit/model_source.h"
#include "nmkit/status.h"
#include "nmkit/tokenizer.h"

namespace nmkit::cli {

// Defaults: 64 sequences of 256 tokens = 16384 calibration tokens, the amount the Wanda
// reference used; ten times the largest input width of SmolLM2 (1536, ffn_down) so every Hessian is
// well determined; 256 tokens keep attention cost and the hidden states (16384 x 576 f32 = 38 MB,
// held twice) small, and half the evaluation context (512) still sees long-range positions.
struct CalibFlags {
  std::string calib;  // empty: the project's calibration text (scripts/fetch_texts.sh calib)
  int64_t seqs = 64;
  int64_t len = 256;
  int refit = 0;      // CG steps of the least-squares refit of the kept weights (0: off)
};
void add_calib_flags(CLI::App& app, CalibFlags& flags);

// The calibration text: --calib, else .cache/texts/tom-sawyer.txt (scripts/fetch_texts.sh calib)
// under the current folder or the folder above the executable's; an Error saying how to get one.
Result<std::string> calibration_text_path(const std::string& flag);

// The tokenizer of a model source (GGUF metadata, or the Hugging Face folder's tokenizer.json).
Result<Tokenizer> source_tokenizer(const ModelSource& source);

// Reads and tokenizes the calibration text, cuts the sequences and prunes `model` in place (built
// with keep_dense_weights). Progress per block on a terminal.
struct CalibRun {
  CalibReport report;
  std::string text_path;
  int64_t text_tokens = 0;
};
// `selected` (by GGUF name; unset: all) picks the linears to prune (CalibOptions::selected).
Result<CalibRun> calibrate_model(LlamaModel& model, const Tokenizer* tokenizer, Pattern pattern,
                                 CalibMethod method, const CalibFlags& flags, CalibLinearFormat format,
                                 std::function<bool(std::string_view name)> selected = {});

nlohmann::json calib_report_json(const CalibRun& run, Pattern pattern, CalibMethod method);
// One summary line: "sparsegpt 6:8 on 64 x 256 tokens: 93.1 s (forward 40.2, Hessian 20.1, ...)".
std::string calib_summary(const CalibRun& run, Pattern pattern, CalibMethod method);

}  // namespace nmkit::cli
