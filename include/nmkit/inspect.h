// What a checkpoint holds, tensor by tensor: dtype, shape, zeros, nmkit's record and the sparsest N:M
// pattern each 2-D float tensor complies with. The rows `nmkit inspect` prints and Python's
// nmkit.inspect returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nmkit/checkpoint.h"
#include "nmkit/pattern.h"
#include "nmkit/status.h"

namespace nmkit {

// The patterns inspect tries; the sparsest one a tensor complies with wins.
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
  std::string format() const;       // format_name(), with " slid" for SlideSparse
};

// Reads and checks every tensor of a safetensors or GGUF file (compressed ones are validated and
// decompressed; GGUF ones dequantized).
Result<std::vector<InspectedTensor>> inspect_file(const std::string& path);

// The file's format from its first bytes ("GGUF" magic, or a safetensors length followed by '{');
// an Error (InvalidFile) "PATH: not a safetensors or GGUF file ..." otherwise.
enum class FileKind { Safetensors, Gguf };
Result<FileKind> sniff_file_kind(const std::string& path);
Result<std::vector<InspectedTensor>> inspect_gguf(const std::string& path);

// {"file": PATH, "tensors": [one object per tensor: name, dtype, shape, format, pattern,
// zero_fraction, zeros, sparsest_pattern, complies_with_pattern, parts, stored_bytes, slid]} as JSON
// text (`indent` spaces, -1 for one line).
std::string inspect_json(const std::string& path, const std::vector<InspectedTensor>& tensors, int indent = 2);

}  // namespace nmkit
