// Validation of a GGUF file's header (key-values and tensor infos), separate from file mapping so
// that it runs (and is fuzzed) on any bytes in memory. Rules: docs/design.md section 11.1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "nmkit/gguf.h"

namespace nmkit::io {

// Arrays of arrays deeper than this are refused, so that a hostile file cannot make the recursive
// reader overflow the stack (real files nest at most once).
inline constexpr int kGgufMaxArrayDepth = 8;
inline constexpr uint32_t kGgufDefaultAlignment = 32;

struct ParsedGguf {
  uint32_t version = 3;
  uint32_t alignment = kGgufDefaultAlignment;
  uint64_t data_start = 0;  // file offset of the data section
  std::vector<GgufKeyValue> metadata;    // file order
  std::vector<GgufTensorInfo> tensors;  // file order
};

// Validates `bytes` (a whole file of `size` bytes) as GGUF without reading tensor data; see
// GgufFile::open for the rules. Every Error is one line starting with "PATH: ".
Result<ParsedGguf> parse_gguf(std::string_view path, const std::byte* bytes, size_t size);

// True when the file starts with the GGUF magic (for callers that sniff a file's format).
bool has_gguf_magic(const std::byte* bytes, size_t size);

}  // namespace nmkit::io
