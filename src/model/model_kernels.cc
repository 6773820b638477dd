#include "model/model_kernels.h"

#include <cmath>
#include <cstring>

// Three clones of every loop: AVX-512 (x86-64-v4), AVX2 + FMA (v3) and baseline SSE2, picked once
// by the loader from cpuid. The library's kernels dispatch by hand (src/cpu); these loops are plain
// C++ the compiler vectorizes, so a clone attribute is all they need.
#define NMKIT_MODEL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace nmkit::model {
namespace {

// Lanes of the blocked reductions: 16 independent partial sums (one ZMM), so the compiler keeps
// them in a register without reordering any float addition of the written order.
constexpr int kLanes = 16;

}  // namespace

void rms_norm(const float* x, const float* weight, int64_t d, float eps, float* y) {
  double sum = 0;
  for (int64_t i = 0; i < d; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(d) + eps));
  for (int64_t i = 0; i < d; ++i) y[i] = x[i] * scale * weight[i];
}

NMKIT_MODEL_CLONES
void exp_inplace(float* x, int64_t n) {
  // Cephes expf: e^x = 2^k e^r, k = floor(x log2 e + 1/2), r = x - k ln2 with ln2 split in two so
  // that k ln2 is exact to 2^-24; e^r ~ 1 + r + r^2 P(r) on |r| <= ln2/2.
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    v = v < -87.3365447f ? -87.3365447f : v;
    v = v > 88.7228391f ? 88.7228391f : v;
    const float k = std::floor(v * 1.44269504088896341f + 0.5f);
    float r = v - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    const float z = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = p * z + r + 1.0f;
    const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(k) + 127) << 23;
    float two_k;
    std::memcpy(&two_k, &bits, 4);
    x[i] = e * two_k;
  }
}

void rope_angles(int64_t p, int64_t head_dim, float base, float* cos_sin) {
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double theta = static_cast<double>(p) *
                         std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    cos_sin[2 * i] = static_cast<float>(std::cos(theta));
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta));
  }
}

NMKIT_MODEL_CLONES
void rope_rotate(float* x, int64_t heads, int64_t head_stride, int64_t head_dim, const float* cos_sin) {
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_stride;
    for (int64_t i = 0; i < head_dim; i += 2) {
      const float c = cos_sin[i], s = cos_sin[i + 1];
      const float a = v[i], b = v[i + 1];
      v[i] = a * c - b * s;
      v[i + 1] = a * s + b * c;
    }
  }
}

NMKIT_MODEL_CLONES
void attend(const float* q, const float* Kt, int64_t kt_stride, const float* V, int64_t head_dim,
            int64_t n_pos, float scale, float* scores, float* out) {
  // Scores: for each of the head_dim rows of K^T, one scaled multiply-add into every position's
  // score (each score's sum runs over d in order, as a dot product would).
  for (int64_t j = 0; j < n_pos; ++j) scores[j] = 0.0f;
  for (int64_t d = 0; d < head_dim; ++d) {
    const float qd = q[d] * scale;
    const float* row = Kt + d * kt_stride;
    for (int64_t j = 0; j < n_pos; ++j) scores[j] += qd * row[j];
  }
  float lane_max[kLanes];
  for (int l = 0; l < kLanes; ++l) lane_max[l] = -INFINITY;
  int64_t j = 0;
  for (; j + kLanes <= n_pos; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane_max[l] = scores[j + l] > lane_max[l] ? scores[j + l] : lane_max[l];
  }
  for (; j < n_pos; ++j) lane_max[0] = scores[j] > lane_max[0] ? scores[j] : lane_max[0];
  float max = lane_max[0];
  for (int l = 1; l < kLanes; ++l) max = lane_max[l] > max ? lane_max[l] : max;
  for (j = 0; j < n_pos; ++j) scores[j] -= max;
  exp_inplace(scores, n_pos);
  float lane_sum[kLanes] = {};
  for (j = 0; j + kLanes <= n_pos; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane_sum[l] += scores[j + l];
  }
  for (; j < n_pos; ++j) lane_sum[0] += scores[j];
  float sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += lane_sum[l];
  for (int64_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
  for (j = 0; j < n_pos; ++j) {
    const float w = scores[j];
    const float* v = V + j * head_dim;
    for (int64_t d = 0; d < head_dim; ++d) out[d] += w * v[d];
  }
  const float inv = 1.0f / sum;
  for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
}

NMKIT_MODEL_CLONES
void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  // In blocks, so that e^-g runs through the vectorized exp over a stack buffer.
  constexpr int64_t kBlock = 256;
  float e[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t m = n - i0 < kBlock ? n - i0 : kBlock;
    for (int64_t i = 0; i < m; ++i) e[i] = -gate[i0 + i];
    exp_inplace(e, m);
    for (int64_t i = 0; i < m; ++i) out[i0 + i] = gate[i0 + i] / (1.0f + e[i]) * up[i0 + i];
  }
}

}  // namespace nmkit::model
