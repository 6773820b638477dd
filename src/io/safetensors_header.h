// Validation of a safetensors header, separate from file mapping so that it can be run (and
// fuzzed) on any bytes in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "nmkit/safetensors.h"

namespace nmkit::io {

// The reference implementation (huggingface/safetensors) refuses headers above 100 MB; so do we,
// so that a corrupt length cannot make us parse gigabytes.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// A DOM of a hostile header costs ~37x its size (96 MB of nesting took 3.5 GB and 34 s, issue 13 R1).
// Nesting deeper than serde_json's 128 (what the reference implementation parses with), more
// tensors than 200k (real checkpoints hold thousands per file; 200k entries already cost ~0.5 GB
// as a DOM), or a key longer than 4096 bytes (real tensor names are under 200; a 50k-character
// name overflowed std::regex's recursion, C2) are refused by the first, streaming pass.
inline constexpr int kMaxJsonDepth = 128;
inline constexpr size_t kMaxTensors = 200'000;
inline constexpr size_t kMaxNameBytes = 4096;

struct ParsedHeader {
  std::vector<TensorInfo> tensors;  // sorted by data offset (then end, then header order)
  Metadata metadata;
  uint64_t data_start = 0;  // file offset of the data section: 8 + header length
};

// Validates `bytes` (a whole file of `size` bytes) as safetensors without reading any tensor data:
// length prefix and bound, well-formed JSON object, entries with known dtype, non-negative shape
// whose byte size does not overflow, data_offsets inside the data section and matching the shape,
// no duplicate keys, and tensors covering the data section exactly (no overlaps, no holes), as the
// reference implementation requires. Every Error is one line starting with "PATH: ".
Result<ParsedHeader> parse_safetensors_header(std::string_view path, const std::byte* bytes, size_t size);

}  // namespace nmkit::io
