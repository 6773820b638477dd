#include "cpu/kernel_table.h"

namespace nmkit::cpu {

void fill_linear_kernels(IsaTier tier, LinearKernels& slots) {
  // Every tier starts from the portable kernels; a higher tier overrides the slots it implements.
  scalar::fill_linear(slots);
  if (tier >= IsaTier::Avx2) {
    avx2::fill_linear(slots);
    avx2::fill_linear_nm(slots);
    avx2::fill_linear_int8(slots);
  }
  if (tier >= IsaTier::Avx512) {
    avx512::fill_linear(slots);
    avx512::fill_linear_nm(slots);
    avx512::fill_linear_int8(slots);
    avx512::fill_linear_token_lanes(slots);
  }
}

LinearFn linear_kernel_for(const LinearKernels& kernels, PackedKind kind, DType dtype) {
  switch (kind) {
    case PackedKind::Dense:
      if (dtype == DType::F32) return kernels.dense_f32;
      if (dtype == DType::BF16) return kernels.dense_bf16;
      if (dtype == DType::I8) return kernels.dense_i8;
      return nullptr;
    case PackedKind::Sparse24:
      if (dtype == DType::F32) return kernels.sparse24_f32;
      if (dtype == DType::BF16) return kernels.sparse24_bf16;
      if (dtype == DType::I8) return kernels.sparse24_i8;
      return nullptr;
    case PackedKind::NM:
      if (dtype == DType::F32) return kernels.nm_f32;
      if (dtype == DType::BF16) return kernels.nm_bf16;
      return nullptr;
  }
  return nullptr;
}

}  // namespace nmkit::cpu
