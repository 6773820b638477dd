#include "ref/linear_ref.h"

#include <limits>

#include "nmkit/status.h"

namespace nmkit {

void ref_int8_linear(const int8_t* qx, const float* sx, int64_t M, int64_t K, const int8_t* qw, const float* sw,
                     int64_t rows, const float* bias, float* y) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += int64_t{qx[m * K + k]} * int64_t{qw[r * K + k]};
      NMKIT_ASSERT(acc >= std::numeric_limits<int32_t>::min() && acc <= std::numeric_limits<int32_t>::max());
      float out = int8_epilogue(static_cast<int32_t>(acc), sx[m], sw[r]);
      if (bias != nullptr) out += bias[r];
      y[m * rows + r] = out;
    }
  }
}

void ref_int8_nm_linear(const int8_t* qx, const float* sx, int64_t M, const NMPacked& weight, const float* sw,
                        const float* bias, float* y) {
  NMKIT_ASSERT(weight.dtype() == DType::I8);
  const int64_t K = weight.K, rows = weight.rows(), per_row = weight.groups() * weight.pattern.keep;
  const auto* values = weight.values.as<int8_t>();
  const auto* mask = weight.mask.as<uint8_t>();
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      int64_t acc = 0, next = r * per_row;
      for (int64_t k = 0; k < weight.K_pad(); ++k) {
        if (((mask[r * weight.mask_stride() + k / 8] >> (k % 8)) & 1) == 0) continue;
        const int64_t code = values[next++];
        if (k < K) acc += int64_t{qx[m * K + k]} * code;
      }
      NMKIT_ASSERT(acc >= std::numeric_limits<int32_t>::min() && acc <= std::numeric_limits<int32_t>::max());
      float out = int8_epilogue(static_cast<int32_t>(acc), sx[m], sw[r]);
      if (bias != nullptr) out += bias[r];
      y[m * rows + r] = out;
    }
  }
}

}  // namespace nmkit
