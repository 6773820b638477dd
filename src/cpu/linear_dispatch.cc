#include "cpu/kernel_table.h"

namespace nmkit::cpu {

void fill_linear_kernels(IsaTier tier, LinearKernels& slots) {
  // Every tier starts from the portable kernels; a higher tier overrides the slots it implements.
  scalar::fill_linear(slots);
  slots.read_stream = scalar::read_stream;
  if (tier >= IsaTier::Avx2) {
    slots.read_stream = avx2::read_stream;
    avx2::fill_linear(slots);
    avx2::fill_linear_nm(slots);
    avx2::fill_linear_int8(slots);
  }
  if (tier >= IsaTier::Avx512) {
    slots.read_stream = avx512::read_stream;
    avx512::fill_linear(slots);
    avx512::fill_linear_nm(slots);
    avx512::fill_linear_int8(slots);
    avx512::fill_linear_token_lanes(slots);
  }
}

}  // namespace nmkit::cpu
