// `nmkit prune MODEL`: the model branch of `nmkit prune` (a GGUF file or a Hugging Face folder in,
// a GGUF file, a Hugging Face folder or HF-named safetensors out), dispatched from cmd_prune.cc.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "tools/nmkit/calib_cli.h"

namespace nmkit::cli {

struct ModelPruneFlags {
  CalibFlags calib;
  std::string dtype = "f32";  // tensors of a written model: f32 | f16 | bf16
  // The weights the calibration passes run with: f32 | bf16 | int8; empty: the file's (prune_model_to).
  std::string pass_weights;
};
void add_model_prune_flags(CLI::App& app, ModelPruneFlags& flags);

// A directory (Hugging Face model) or a file that starts with "GGUF".
bool is_model_source(const std::string& path);

struct ModelPruneArgs {
  std::string input, output, pattern, method, format, report;
  std::string include, exclude;  // regexes over each linear's GGUF and Hugging Face names
  ModelPruneFlags flags;
};
int run_prune_model(const ModelPruneArgs& args);

}  // namespace nmkit::cli
