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
#include "nmkit/prune_model.h"
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
  bool permute = false;  // free channel permutations before pruning (docs/design.md 12.2)
  bool swaps = false;    // in-group swaps after the mask (docs/design.md 12.3)
  double dense_targets = 0;  // strength of the dense targets (docs/design.md 12.4; 0: off)
  bool permute_inputs = false;  // measurement of design 12.2 (c) (nmkit eval, dense forms only)
};
void add_calib_flags(CLI::App& app, CalibFlags& flags);

// The calibration text: --calib, else .cache/texts/tom-sawyer.txt (scripts/fetch_texts.sh calib)
// under the current folder or the folder above the executable's; an Error saying how to get one.
Result<std::string> calibration_text_path(const std::string& flag);

class Progress;

// The library's calibration options (include/nmkit/prune_model.h) from the flags: the default text
// when --calib is empty and the method needs one (an Error saying how to get it).
Result<CalibTextOptions> calib_text_options(Pattern pattern, CalibMethod method, const CalibFlags& flags,
                                            CalibLinearFormat format);
// Shows calibration's blocks on `progress` (when it is shown).
void show_calib_progress(Progress& progress, CalibTextOptions& options);

// calibrate_model (include/nmkit/prune_model.h) with the flags' sizes and text (the default one when
// --calib is empty), progress per block on a terminal.
Result<CalibRun> calibrate_model(LlamaModel& model, const Tokenizer* tokenizer, Pattern pattern,
                                 CalibMethod method, const CalibFlags& flags, CalibLinearFormat format);

nlohmann::json calib_report_json(const CalibRun& run, Pattern pattern, CalibMethod method);
// One summary line: "sparsegpt 6:8 on 64 x 256 tokens: 93.1 s (forward 40.2, Hessian 20.1, ...)".
std::string calib_summary(const CalibRun& run, Pattern pattern, CalibMethod method);

}  // namespace nmkit::cli
