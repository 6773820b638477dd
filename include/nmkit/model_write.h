// Saving a LlamaModel's weights (after pruning on load or calibrated pruning) as a GGUF file that
// llama.cpp-compatible readers load (docs/design.md 11.1).
#pragma once

#include <string>

#include "nmkit/dtype.h"
#include "nmkit/model.h"
#include "nmkit/model_source.h"
#include "nmkit/status.h"

namespace nmkit {

// Writes LlamaModel::tensors() (needs ModelOptions::keep_dense_weights) in the source GGUF's tensor
// order (GGUF order for a Hugging Face source) as `dtype`
// (F32, F16 or BF16; norms stay F32, as llama.cpp's converter keeps 1-D tensors), with the source
// GGUF's metadata in its order and general.file_type set to the dtype's llama.cpp file type (0 F32,
// 1 F16, 32 BF16); for a Hugging Face source, general.architecture and the llama.* keys from the
// parameters (no tokenizer keys). Atomic (write_gguf); an Error names the path.
Status write_model_gguf(const std::string& path, const LlamaModel& model, const ModelSource& source,
                        DType dtype = DType::F32);

}  // namespace nmkit
