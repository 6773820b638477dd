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

}  // namespace nmkit
