// `nmkit prune MODEL`: the model branch of `nmkit prune` (a GGUF file or a Hugging Face directory in,
// GGUF or safetensors out), dispatched from cmd_prune.cc.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "tools/nmkit/calib_cli.h"

namespace nmkit::cli {

struct ModelPruneFlags {
  CalibFlags calib;
  std::string dtype = "f32";  // tensors of a written model: f32 | f16 | bf16
  // The weights the calibration passes run with: f32 | bf16 | int8.
  std::string pass_weights = "f32";
};
void add_model_prune_flags(CLI::App& app, ModelPruneFlags& flags);

// A directory (Hugging Face model) or a file that starts with "GGUF".
bool is_model_source(const std::string& path);

int run_prune_model(const std::string& input, const std::string& output, const std::string& pattern,
                    const std::string& method, const std::string& format, const std::string& report,
                    const ModelPruneFlags& flags);

}  // namespace nmkit::cli
