// The 64-byte aligned buffers of packed weights and of the kernels' per-thread scratch.
#include "cpu/linear_kernels.h"

namespace nmkit::cpu {

AlignedBytes AlignedBytes::zeros(size_t bytes) {
  AlignedBytes out;
  // 64 bytes of slack past the end, zero too: kernels may load a whole vector at a row's end.
  out.data = allocate_page_bytes(stored_bytes(bytes), true);
  out.size = out.allocated = bytes;
  return out;
}

AlignedBytes AlignedBytes::reserved(size_t bytes) {
  AlignedBytes out;
  out.size = out.allocated = bytes;
  return out;
}

AlignedBytes AlignedBytes::borrowed(const std::byte* p, size_t bytes) {
  AlignedBytes out;
  out.data = PageBytes(const_cast<std::byte*>(p), PageBytesFree{0, true});  // never written through
  out.size = out.allocated = bytes;
  return out;
}

}  // namespace nmkit::cpu
