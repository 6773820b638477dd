#include "model/model_kernels.h"

#include <cmath>
#include <cstring>

#include "nmkit/cpu.h"

// Every kernel below is one always-inline body compiled three times: for AVX-512 (x86-64-v4), AVX2 +
// FMA (x86-64-v3) and the baseline (SSE2, the "scalar" tier), and run on the tier the library's
// kernels use (active_tier(): NMKIT_ISA, else the best detected), so tests cover every tier.
#define NMKIT_INLINE inline __attribute__((always_inline))
#define NMKIT_DISPATCH_CLONES(name, params, args, avx512_body, avx2_body, scalar_body)   \
  __attribute__((target("arch=x86-64-v4"))) void name##_avx512 params { avx512_body args; } \
  __attribute__((target("arch=x86-64-v3"))) void name##_avx2 params { avx2_body args; }     \
  void name##_scalar params { scalar_body args; }                                        \
  }                                                                                      \
  void name params {                                                                     \
    switch (model_tier()) {                                                              \
      case IsaTier::Avx512: name##_avx512 args; break;                                   \
      case IsaTier::Avx2: name##_avx2 args; break;                                       \
      default: name##_scalar args; break;                                                \
    }                                                                                    \
  }                                                                                      \
  namespace {
#define NMKIT_DISPATCH(name, params, args) \
  NMKIT_DISPATCH_CLONES(name, params, args, name##_body, name##_body, name##_body)
// Bodies written on vectors of W floats (below): each clone runs them on its own register width.
#define NMKIT_DISPATCH_VECTORS(name, params, args) \
  NMKIT_DISPATCH_CLONES(name, params, args, name##_body<16>, name##_body<8>, name##_body<4>)

namespace nmkit::model {
namespace {

// Lanes of the blocked reductions: 16 independent partial sums (one ZMM, two YMM, four XMM: the same
// sums on every tier), kept in registers without reordering any float addition of the written order.
constexpr int kLanes = 16;

IsaTier model_tier() {
  static const IsaTier tier = [] {
    auto t = active_tier();  // a bad NMKIT_ISA is reported by the linears' first call
    return t.ok() ? *t : IsaTier::Scalar;
  }();
  return tier;
}

}  // namespace

namespace {

// Rows normalized together: each row's sum of squares still runs in order (so every row's result is
// the one-row loop's, bit for bit), but kNormRows independent sums are in flight instead of one
// chain of dependent double additions (one row of 576 was ~2300 cycles of add latency: the two norms
// of each block took 9.8 ms of a SmolLM2 prefill of 512 tokens, 3.5 ms with 8 rows interleaved).
constexpr int kNormRows = 8;

template <int R>
NMKIT_INLINE void rms_norm_block(const float* x, const float* weight, int64_t d, float eps, float* y) {
  double sum[R] = {};
  for (int64_t i = 0; i < d; ++i) {
    for (int r = 0; r < R; ++r) sum[r] += static_cast<double>(x[r * d + i]) * x[r * d + i];
  }
  for (int r = 0; r < R; ++r) {
    const float scale = static_cast<float>(1.0 / std::sqrt(sum[r] / static_cast<double>(d) + eps));
    for (int64_t i = 0; i < d; ++i) y[r * d + i] = x[r * d + i] * scale * weight[i];
  }
}

NMKIT_INLINE void rms_norm_rows_body(const float* x, const float* weight, int64_t n, int64_t d, float eps, float* y) {
  int64_t r = 0;
  for (; r + kNormRows <= n; r += kNormRows) rms_norm_block<kNormRows>(x + r * d, weight, d, eps, y + r * d);
  for (; r < n; ++r) rms_norm_block<1>(x + r * d, weight, d, eps, y + r * d);
}

NMKIT_DISPATCH(rms_norm_rows, (const float* x, const float* weight, int64_t n, int64_t d, float eps, float* y),
               (x, weight, n, d, eps, y))
}  // namespace

namespace {

// W floats as one GCC vector: a ZMM (W = 16) in the AVX-512 clone, a YMM (8) in AVX2, an XMM (4) in
// the baseline. Written with explicit vectors because the compiler's own vectorization of these loops
// kept the Q x 16 sums in memory (measured 48% of a SmolLM2 prefill in attention, against ~5% of its
// arithmetic). Each clone gets the width of its registers: a 16-float vector in the AVX2 and baseline
// clones was lowered through memory (attention 7.6x and e^x 8.2x slower on AVX2 than on AVX-512). The
// reductions keep 16 lanes whatever W is (a 16-lane sum is 16/W vectors), and lanes never mix, so
// every width computes the same bits. Vectors are only loaded and stored through pointers (a function
// returning one would change the ABI between clones).
template <int W>
struct Vec {
  typedef float F __attribute__((vector_size(W * 4)));
  typedef float Unaligned __attribute__((vector_size(W * 4), aligned(4), may_alias));
  typedef int32_t I __attribute__((vector_size(W * 4)));
};
#define NMKIT_LOAD(V, p) (*reinterpret_cast<const typename V::Unaligned*>(p))
#define NMKIT_STORE(V, p, v) (*reinterpret_cast<typename V::Unaligned*>(p) = (v))

// e^x on the W lanes of *value in place. Cephes expf: e^x = 2^k e^r, k = x log2 e rounded to
// nearest, r = x - k ln2 with ln2 split in two so that k ln2 is exact to 2^-24; e^r ~ 1 + r + r^2 P(r)
// on |r| <= ln2/2. The rounding adds and subtracts 1.5 * 2^23 (exact for |t| < 2^22) instead of
// calling floorf. Lanes are independent, so a value's result does not depend on its neighbours.
template <int W>
NMKIT_INLINE void exp_vec(typename Vec<W>::F* value) {
  using F = typename Vec<W>::F;
  F v = *value;
  const F lo = F{} - 87.3365447f, hi = F{} + 88.7228391f;
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  const F k = (v * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  F r = v - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  const F z = r * r;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F e = p * z + r + 1.0f;
  const typename Vec<W>::I bits = (__builtin_convertvector(k, typename Vec<W>::I) + 127) << 23;
  F two_k;
  std::memcpy(&two_k, &bits, sizeof two_k);
  *value = e * two_k;
}

// W values at a time, the last n % W in a zero-padded vector.
template <int W>
NMKIT_INLINE void exp_inplace_body(float* x, int64_t n) {
  using V = Vec<W>;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    typename V::F v = NMKIT_LOAD(V, x + i);
    exp_vec<W>(&v);
    NMKIT_STORE(V, x + i, v);
  }
  if (i == n) return;
  float tail[W] = {};
  std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(float));
  typename V::F v = NMKIT_LOAD(V, tail);
  exp_vec<W>(&v);
  NMKIT_STORE(V, tail, v);
  std::memcpy(x + i, tail, static_cast<size_t>(n - i) * sizeof(float));
}

NMKIT_DISPATCH_VECTORS(exp_inplace, (float* x, int64_t n), (x, n))
}  // namespace

void rope_angles(int64_t p, int64_t head_dim, float base, float scale, const float* factors, float* cos_sin) {
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double theta = static_cast<double>(p) * static_cast<double>(scale) *
                   std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (factors != nullptr) theta /= static_cast<double>(factors[i]);
    cos_sin[2 * i] = static_cast<float>(std::cos(theta));
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta));
  }
}

namespace {

// Pair i of a head is (2i, 2i+1) in NORM, (i, i + head_dim/2) in NEOX: one body, the pair's two
// indices its only difference.
NMKIT_INLINE void rope_rotate_body(float* x, int64_t heads, int64_t head_stride, int64_t head_dim,
                                   const float* cos_sin, bool neox) {
  const int64_t half = head_dim / 2;
  const int64_t step = neox ? 1 : 2, other = neox ? half : 1;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_stride;
    for (int64_t i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      float* first = v + i * step;
      const float a = first[0], b = first[other];
      first[0] = a * c - b * s;
      first[other] = a * s + b * c;
    }
  }
}

NMKIT_DISPATCH(rope_rotate,
               (float* x, int64_t heads, int64_t head_stride, int64_t head_dim, const float* cos_sin, bool neox),
               (x, heads, head_stride, head_dim, cos_sin, neox))
}  // namespace

namespace {


// sum_i a[i] * b[i * b_step] in index order, one function for every query count: inlined
// into attend_q<Q>, the compiler vectorized it differently per Q (fused multiply-adds for some,
// rounded products before an in-order sum for others), so with a head_dim that is not a multiple of 16
// a query's output depended on the other queries of its call (tests/model_kernels/attend_test.cc).
__attribute__((noinline)) float strided_dot(const float* a, const float* b, int64_t b_step, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i * b_step];
  return sum;
}

// Scores of Q queries: rows of n_pos in `scores`. W positions at a time, the Q x W sums kept in
// registers over head_dim, each Kt vector loaded once for the Q queries.
template <int Q, int W>
NMKIT_INLINE void score_rows(const float* const* q, const float* Kt, int64_t stride, int64_t hd, int64_t n_pos,
                             float scale, float* scores) {
  using V = Vec<W>;
  const int64_t full = n_pos / kLanes * kLanes;
  int64_t j = 0;
  for (; j < full; j += W) {
    typename V::F acc[Q];
    for (int h = 0; h < Q; ++h) acc[h] = typename V::F{};
    for (int64_t d = 0; d < hd; ++d) {
      const typename V::F r = NMKIT_LOAD(V, Kt + d * stride + j);
      for (int h = 0; h < Q; ++h) acc[h] += q[h][d] * r;
    }
    for (int h = 0; h < Q; ++h) NMKIT_STORE(V, scores + h * n_pos + j, acc[h] * scale);
  }
  if (j == n_pos) return;
  // The last n_pos % 16 positions: their keys copied into 16 zero-padded lanes, then the same vector
  // sums (the strided scalar loop this replaces took half of attention's time in a SmolLM2 prefill,
  // and rounded differently from the vector path).
  constexpr int64_t kMaxTailDim = 256;
  if (hd <= kMaxTailDim) {
    float tail[kMaxTailDim * kLanes];
    const int64_t left = n_pos - j;
    for (int64_t d = 0; d < hd; ++d) {
      for (int64_t l = 0; l < kLanes; ++l) tail[d * kLanes + l] = l < left ? Kt[d * stride + j + l] : 0.0f;
    }
    for (int64_t l0 = 0; l0 < left; l0 += W) {
      typename V::F acc[Q];
      for (int h = 0; h < Q; ++h) acc[h] = typename V::F{};
      for (int64_t d = 0; d < hd; ++d) {
        const typename V::F r = NMKIT_LOAD(V, tail + d * kLanes + l0);
        for (int h = 0; h < Q; ++h) acc[h] += q[h][d] * r;
      }
      for (int h = 0; h < Q; ++h) {
        float lanes[W];
        NMKIT_STORE(V, lanes, acc[h] * scale);
        for (int64_t l = l0; l < left && l < l0 + W; ++l) scores[h * n_pos + j + l] = lanes[l - l0];
      }
    }
    return;
  }
  for (; j < n_pos; ++j) {
    for (int h = 0; h < Q; ++h) {
      scores[h * n_pos + j] = strided_dot(q[h], Kt + j, stride, hd) * scale;
    }
  }
}

// out[h] = sum_j scores[h][j] V[j], W columns of head_dim at a time with the Q x W sums in registers;
// the columns past the last multiple of 16 by strided_dot.
template <int Q, int W>
NMKIT_INLINE void weighted_rows(const float* scores, int64_t n_pos, const float* Vals, int64_t hd,
                                float* const* out) {
  using V = Vec<W>;
  const int64_t full = hd / kLanes * kLanes;
  int64_t d0 = 0;
  for (; d0 < full; d0 += W) {
    typename V::F acc[Q];
    for (int h = 0; h < Q; ++h) acc[h] = typename V::F{};
    for (int64_t j = 0; j < n_pos; ++j) {
      const typename V::F v = NMKIT_LOAD(V, Vals + j * hd + d0);
      for (int h = 0; h < Q; ++h) acc[h] += scores[h * n_pos + j] * v;
    }
    for (int h = 0; h < Q; ++h) NMKIT_STORE(V, out[h] + d0, acc[h]);
  }
  for (; d0 < hd; ++d0) {
    for (int h = 0; h < Q; ++h) {
      out[h][d0] = strided_dot(scores + h * n_pos, Vals + d0, hd, n_pos);
    }
  }
}

// Softmax of one row in place, normalized (docs/design.md 11.2: 16 lane sums in lane order).
template <int W>
NMKIT_INLINE void softmax_row(float* s, int64_t n) {
  using V = Vec<W>;
  float lane_max[kLanes];
  for (int l = 0; l < kLanes; ++l) lane_max[l] = -INFINITY;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane_max[l] = s[j + l] > lane_max[l] ? s[j + l] : lane_max[l];
  }
  for (; j < n; ++j) lane_max[0] = s[j] > lane_max[0] ? s[j] : lane_max[0];
  float max = lane_max[0];
  for (int l = 1; l < kLanes; ++l) max = lane_max[l] > max ? lane_max[l] : max;
  // e^(s - max) and its 16 lane sums 16 positions at a time, while they are in registers: the same
  // operations in the same order as a pass for each (subtract, exp, sum), with one load and one store
  // per vector instead of three and two (the passes were a fifth of attention's time, SmolLM2 prefill).
  constexpr int kParts = kLanes / W;
  typename V::F sums[kParts];
  for (int t = 0; t < kParts; ++t) sums[t] = typename V::F{};
  for (j = 0; j + kLanes <= n; j += kLanes) {
    for (int t = 0; t < kParts; ++t) {
      typename V::F e = NMKIT_LOAD(V, s + j + t * W) - max;
      exp_vec<W>(&e);
      NMKIT_STORE(V, s + j + t * W, e);
      sums[t] += e;
    }
  }
  float lane_sum[kLanes];
  for (int t = 0; t < kParts; ++t) NMKIT_STORE(V, lane_sum + t * W, sums[t]);
  for (int64_t t = j; t < n; ++t) s[t] -= max;
  exp_inplace_body<W>(s + j, n - j);
  for (; j < n; ++j) lane_sum[0] += s[j];
  float sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += lane_sum[l];
  const float inv = 1.0f / sum;
  for (j = 0; j < n; ++j) s[j] *= inv;
}

template <int Q, int W>
NMKIT_INLINE void attend_q(const float* const* q_in, const int64_t* n_pos, const float* Kt, int64_t kt_stride,
                           const float* V, int64_t hd, float scale, float* scores, float* const* out_in) {
  const float* q[Q];
  float* out[Q];
  int64_t n_max = 0;
  for (int h = 0; h < Q; ++h) {
    q[h] = q_in[h];
    out[h] = out_in[h];
    n_max = n_pos[h] > n_max ? n_pos[h] : n_max;
  }
  score_rows<Q, W>(q, Kt, kt_stride, hd, n_max, scale, scores);
  for (int h = 0; h < Q; ++h) {
    float* row = scores + h * n_max;
    softmax_row<W>(row, n_pos[h]);
    for (int64_t j = n_pos[h]; j < n_max; ++j) row[j] = 0.0f;  // masked: adds exact zeros below
  }
  weighted_rows<Q, W>(scores, n_max, V, hd, out);
}

template <int W>
NMKIT_INLINE void attend_body(const float* const* q, const int64_t* n_pos, int nq, const float* Kt, int64_t kt_stride,
                              const float* V, int64_t head_dim, float scale, float* scores, float* const* out) {
#define NMKIT_ATTEND_CASE(n) \
  case n: attend_q<n, W>(q, n_pos, Kt, kt_stride, V, head_dim, scale, scores, out); break;
  switch (nq) {
    NMKIT_ATTEND_CASE(1) NMKIT_ATTEND_CASE(2) NMKIT_ATTEND_CASE(3) NMKIT_ATTEND_CASE(4)
    NMKIT_ATTEND_CASE(5) NMKIT_ATTEND_CASE(6) NMKIT_ATTEND_CASE(7) NMKIT_ATTEND_CASE(8)
    NMKIT_ATTEND_CASE(9) NMKIT_ATTEND_CASE(10) NMKIT_ATTEND_CASE(11)
    default: attend_q<12, W>(q, n_pos, Kt, kt_stride, V, head_dim, scale, scores, out); break;
  }
#undef NMKIT_ATTEND_CASE
}

NMKIT_DISPATCH_VECTORS(attend,
               (const float* const* q, const int64_t* n_pos, int nq, const float* Kt, int64_t kt_stride,
                const float* V, int64_t head_dim, float scale, float* scores, float* const* out),
               (q, n_pos, nq, Kt, kt_stride, V, head_dim, scale, scores, out))
}  // namespace

namespace {

// The gate's argument of e^: -g for SiLU, -2y = -2 sqrt(2/pi) (g + 0.044715 g^3) for GELU-tanh
// (model_kernels.h); then out = g / (1 + e) * up either way.
// Through pointers, as every vector here (Vec).
template <bool Gelu, class F>
NMKIT_INLINE void gate_exponent(const F* g, F* e) {
  if constexpr (Gelu) {
    *e = (*g + 0.044715f * *g * *g * *g) * -1.5957691216057308f;  // 2 sqrt(2/pi)
  } else {
    *e = -*g;
  }
}

template <int W, bool Gelu>
NMKIT_INLINE void gated_body(const float* gate, const float* up, int64_t n, float* out) {
  // W values at a time in registers (exp_vec), the last n % W through exp_inplace_body: the same
  // operations either way. (Negate, exp and the product were three passes over a stack buffer.)
  using V = Vec<W>;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const typename V::F g = NMKIT_LOAD(V, gate + i);
    typename V::F e;
    gate_exponent<Gelu>(&g, &e);
    exp_vec<W>(&e);
    NMKIT_STORE(V, out + i, g / (1.0f + e) * NMKIT_LOAD(V, up + i));
  }
  float e[W];
  const int64_t m = n - i;
  for (int64_t t = 0; t < m; ++t) gate_exponent<Gelu>(gate + i + t, e + t);
  exp_inplace_body<W>(e, m);
  for (int64_t t = 0; t < m; ++t) out[i + t] = gate[i + t] / (1.0f + e[t]) * up[i + t];
}

template <int W>
NMKIT_INLINE void swiglu_body(const float* gate, const float* up, int64_t n, float* out) {
  gated_body<W, false>(gate, up, n, out);
}

template <int W>
NMKIT_INLINE void geglu_body(const float* gate, const float* up, int64_t n, float* out) {
  gated_body<W, true>(gate, up, n, out);
}

NMKIT_DISPATCH_VECTORS(swiglu, (const float* gate, const float* up, int64_t n, float* out), (gate, up, n, out))
NMKIT_DISPATCH_VECTORS(geglu, (const float* gate, const float* up, int64_t n, float* out), (gate, up, n, out))
}  // namespace

}  // namespace nmkit::model
