// The 64-byte aligned buffers of packed weights and of the kernels' per-thread scratch.
#include <cstring>

#include "cpu/linear_kernels.h"

namespace nmkit::cpu {

AlignedBytes AlignedBytes::zeros(size_t bytes) {
  AlignedBytes out;
  const size_t rounded = (bytes + 63) / 64 * 64 + 64;
  out.data.reset(static_cast<std::byte*>(::operator new[](rounded, std::align_val_t(64))));
  std::memset(out.data.get(), 0, rounded);
  out.size = bytes;
  return out;
}

}  // namespace nmkit::cpu
