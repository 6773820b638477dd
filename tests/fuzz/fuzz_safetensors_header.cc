// libFuzzer target: the safetensors header validation (src/io/safetensors_header.cc) on any bytes.
// A refused file is fine; a crash, hang, leak, sanitizer report or an accepted header whose tensors
// fall outside the file or disagree with their byte sizes is a bug.
#include <cstddef>
#include <cstdint>

#include "nmkit/tensor.h"
#include "src/io/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  auto parsed = nmkit::io::parse_safetensors_header("fuzz.safetensors", bytes, size);
  if (!parsed.ok()) return 0;
  for (const nmkit::TensorInfo& t : parsed->tensors) {
    const auto nbytes = nmkit::checked_nbytes(t.shape, t.dtype);
    if (!nbytes || t.end < t.begin || t.end - t.begin != static_cast<uint64_t>(*nbytes) ||
        parsed->data_start + t.end > size) {
      __builtin_trap();  // accepted a tensor that does not fit its shape or the file
    }
  }
  return 0;
}
