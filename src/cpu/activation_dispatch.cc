// Fills the activation-pass slots per tier (src/cpu/activation_kernels.h).
#include "cpu/kernel_table.h"

namespace nmkit::cpu {

void fill_activation_kernels(IsaTier tier, ActivationKernels& slots) {
  switch (tier) {
    case IsaTier::Scalar:
      slots.all_finite = scalar::all_finite;
      slots.all_finite_bf16 = scalar::all_finite_bf16;
      slots.to_bf16 = scalar::to_bf16;
      slots.to_token_lanes = scalar::to_token_lanes;
      break;
    case IsaTier::Avx2:
      slots.all_finite = avx2::all_finite;
      slots.all_finite_bf16 = avx2::all_finite_bf16;
      slots.to_bf16 = avx2::to_bf16;
      slots.to_token_lanes = scalar::to_token_lanes;  // the portable pass: AVX2 has no token-lane kernels
      break;
    case IsaTier::Avx512:
      slots.all_finite = avx512::all_finite;
      slots.all_finite_bf16 = avx512::all_finite_bf16;
      slots.to_bf16 = avx512::to_bf16;
      slots.to_token_lanes = avx512::to_token_lanes;
      break;
  }
}

}  // namespace nmkit::cpu
