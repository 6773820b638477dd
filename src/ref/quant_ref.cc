// Per-token quantization by the letter of docs/design.md section 6.
#include "ref/quant_ref.h"

#include <cmath>

#include "nmkit/status.h"
// The E4M3 encoding rule (design.md 6) from its header: nmkit_ref links only core and format.
#include "quant/quant_rules.h"

namespace nmkit {
namespace {

// Round half to even without the floating-point environment: floor, then compare the fraction.
float round_half_even(float v) {
  const float low = std::floor(v);
  const float fraction = v - low;  // exact for |v| < 2^23
  if (fraction > 0.5f) return low + 1.0f;
  if (fraction < 0.5f) return low;
  return std::fmod(low, 2.0f) == 0.0f ? low : low + 1.0f;
}

uint8_t code_of(QuantType type, float product) {
  if (std::isnan(product)) return 0;  // 0 * inf: inv infinite for absmax below 2^-121
  if (type == QuantType::E4M3) return quant_rules::e4m3_code(product);
  float v = product;
  if (v > 127.0f) v = 127.0f;
  if (v < -127.0f) v = -127.0f;
  return static_cast<uint8_t>(static_cast<int8_t>(round_half_even(v)));
}

}  // namespace

Quantized ref_quantize(const TensorView& x, QuantType type, const SlideGeometry* lift) {
  NMKIT_ASSERT(x.shape.size() == 2);
  const int64_t M = x.rows();
  const int64_t K = x.cols();
  const int64_t cols = lift != nullptr ? lift->K_prime() : K;
  const std::vector<float> values = to_f32(x);
  Quantized q;
  q.type = type;
  q.codes = Tensor::empty(type == QuantType::Int8 ? DType::I8 : DType::F8_E4M3, {M, cols});
  q.scales = Tensor::empty(DType::F32, {M});
  auto* codes = q.codes.as<uint8_t>();
  auto* scales = q.scales.as<float>();
  const float qmax = type == QuantType::Int8 ? 127.0f : 448.0f;
  for (int64_t m = 0; m < M; ++m) {
    const float* row = values.data() + m * K;
    float absmax = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      NMKIT_ASSERT(std::isfinite(row[k]));
      if (std::fabs(row[k]) > absmax) absmax = std::fabs(row[k]);
    }
    const float inv = absmax == 0.0f ? 0.0f : qmax / absmax;
    scales[m] = absmax == 0.0f ? 1.0f : absmax / qmax;
    for (int64_t j = 0; j < cols; ++j) {
      int64_t i = j;
      if (lift != nullptr) {
        // docs/design.md 5: q = j / 4(N-1), r = j % 4(N-1), w = r / 4, lane = r % 4, i = q*2N + 2w + lane.
        const int64_t out_group = 4 * static_cast<int64_t>(lift->N() - 1);
        const int64_t w = (j % out_group) / 4;
        const int64_t lane = (j % out_group) % 4;
        i = (j / out_group) * 2 * lift->N() + 2 * w + lane;
        if (j >= lift->K_prime_raw() || i >= K) i = -1;
      }
      codes[m * cols + j] = (i < 0 || absmax == 0.0f) ? 0 : code_of(type, row[i] * inv);
    }
  }
  return q;
}

}  // namespace nmkit
