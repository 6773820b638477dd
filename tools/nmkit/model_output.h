// Where `nmkit prune MODEL` and `nmkit convert MODEL` write a model (-o, --dtype), and everything
// checked about it before the long work (issue 24, items 1 and 7; docs/design.md 10.12, 11.1).
#pragma once

#include <string>
#include <vector>

#include "nmkit/dtype.h"
#include "nmkit/files.h"
#include "nmkit/model_source.h"
#include "nmkit/model_write.h"
#include "nmkit/status.h"

namespace nmkit::cli {

struct ModelOutput {
  enum class Kind { Gguf, HfFolder, HfWeights };
  std::string path;  // as given
  Kind kind = Kind::Gguf;
  DType dtype = DType::F32;
};

// -o and --dtype: OUT.gguf; a folder (DIR/, an existing folder, or a last component without a '.');
// OUT.safetensors for a Hugging Face source only (its weights, to drop into its folder). Anything
// else (-o "", -o out.txt) is an Error saying what -o takes; so is a dtype other than f32, f16, bf16.
Result<ModelOutput> parse_model_output(const std::string& output, const std::string& dtype,
                                       const ModelSource& source);

// The checks before the long work: -o is none of the files the source reads (its folder's config,
// index, shards and tokenizer included) nor another input or output; an output folder holds no input
// and only files nmkit writes; the location takes a temporary (one is made and removed: a read-only
// or missing folder fails now, not after the pruning); and its file system has room for the tensors.
Status check_model_output(const ModelOutput& output, const ModelSource& source,
                          const std::vector<FileRole>& other_inputs, const std::vector<FileRole>& other_outputs);

// Writes the tensors, with a progress line on a terminal.
Status write_model_output(const ModelOutput& output, const ModelTensors& tensors, const ModelSource& source);

}  // namespace nmkit::cli
