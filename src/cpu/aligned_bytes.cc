// The 64-byte aligned buffers of packed weights and of the kernels' per-thread scratch.
#include "cpu/linear_kernels.h"

namespace nmkit::cpu {

AlignedBytes AlignedBytes::zeros(size_t bytes) {
  AlignedBytes out;
  // 64 bytes of slack past the end, zero too: kernels may load a whole vector at a row's end.
  out.data = allocate_page_bytes((bytes + 63) / 64 * 64 + 64, true);
  out.size = bytes;
  return out;
}

}  // namespace nmkit::cpu
