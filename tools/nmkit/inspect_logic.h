// What `nmkit inspect` reports about a checkpoint, also used by `nmkit demo` to check its outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nmkit/checkpoint.h"
#include "nmkit/pattern.h"
#include "nmkit/status.h"

namespace nmkit::cli {

// The patterns inspect tries, as the issue lists them; the sparsest one a tensor complies with wins.
const std::vector<Pattern>& inspect_candidates();

struct InspectedTensor {
  std::string name;                     // logical name (a compressed weight without .values/.meta/.mask)
  DType dtype = DType::F32;
  std::string stored_type;              // GGUF: the ggml type ("Q4_1"), shown instead of dtype
  Shape shape;                          // logical shape
  std::optional<WeightRecord> record;   // nmkit's record, when the file has one
  std::vector<std::string> parts;       // file tensors it is made of
  size_t stored_bytes = 0;              // bytes of those parts
  int64_t zeros = 0;                    // elements equal to zero (logical, after decompression)
  bool checked = false;                 // a 2-D float tensor: sparsest and complies are meaningful
  std::optional<Pattern> sparsest;      // of inspect_candidates(), when checked
  std::optional<bool> complies;         // with record->pattern, when there is a record and checked

  double zero_fraction() const;
  std::string format_name() const;  // "-" (plain), "dense", "sparse24", "nm", "cutlass_sm80"
  std::string format() const;  // format_name(), with " slid" for SlideSparse
};

// Reads and checks every tensor of the file (compressed ones are validated and decompressed; GGUF
// ones dequantized).
Result<std::vector<InspectedTensor>> inspect_file(const std::string& path);

// inspect_gguf.cc: the file's format from its first bytes ("GGUF" magic, or a safetensors length
// followed by '{'); an Error "PATH: not a safetensors or GGUF file ..." otherwise.
enum class FileKind { Safetensors, Gguf };
Result<FileKind> sniff_file_kind(const std::string& path);
Result<std::vector<InspectedTensor>> inspect_gguf(const std::string& path);

std::string inspect_table(const std::vector<InspectedTensor>& tensors);
nlohmann::json inspect_json(const std::string& path, const std::vector<InspectedTensor>& tensors);

}  // namespace nmkit::cli
