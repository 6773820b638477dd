// The streaming read of the read-bandwidth probe (cpu/linear_kernels.h ReadStreamFn), 8 bytes a load.
#include <cstring>

#include "cpu/linear_kernels.h"

namespace nmkit::cpu::scalar {

uint64_t read_stream(const std::byte* p, size_t bytes, size_t row_bytes) {
  uint64_t acc[4] = {};
  auto word = [](const std::byte* at) {
    uint64_t v;
    std::memcpy(&v, at, 8);
    return v;
  };
  if (row_bytes == 0) {
    for (size_t i = 0; i < bytes; i += 32) {
      for (int j = 0; j < 4; ++j) acc[j] ^= word(p + i + 8 * static_cast<size_t>(j));
    }
  } else {
    for (size_t block = 0; block < bytes; block += 4 * row_bytes) {
      for (size_t i = 0; i < row_bytes; i += 8) {
        for (int r = 0; r < 4; ++r) acc[r] ^= word(p + block + static_cast<size_t>(r) * row_bytes + i);
      }
    }
  }
  return acc[0] ^ acc[1] ^ acc[2] ^ acc[3];
}

}  // namespace nmkit::cpu::scalar
