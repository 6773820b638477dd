// AVX-512 nm kernels (any keep:group up to 16), f32 and bf16 weights. Each 16-wide step of K loads
// the step's 16 mask bits and expands the next popcount(mask) values into their lanes (vexpandps,
// or vpexpandw for bf16), then runs the dense FMA; rows are separate streams, 4 in flight.
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*(), which -Wuninitialized
// reports inside the header; the values are fully overwritten, so the warning is silenced here only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

inline __m512 expand16(__mmask16 mask, const float* p) { return _mm512_maskz_expandloadu_ps(mask, p); }
inline __m512 expand16(__mmask16 mask, const uint16_t* p) {
  const __m256i bits = _mm256_maskz_expandloadu_epi16(mask, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

template <int R, int Mc, class T>
void nm_rows(const LinearCall& call, int64_t row0, int64_t m0) {
  const PackedLinear& w = *call.w;
  const T* v[R];
  const uint16_t* bits[R];
  for (int r = 0; r < R; ++r) {
    v[r] = w.values.as<T>() + (row0 + r) * w.value_stride;
    bits[r] = reinterpret_cast<const uint16_t*>(w.meta.as<uint8_t>() + (row0 + r) * w.mask_stride);
  }
  const float* x = static_cast<const float*>(call.x) + m0 * w.K_x;
  __m512 acc[Mc][R];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_ps();
  const int64_t steps = w.K_x / 16;
  for (int64_t s = 0; s < steps; ++s) {
    __m512 xs[Mc];
    for (int m = 0; m < Mc; ++m) xs[m] = _mm512_loadu_ps(x + m * w.K_x + s * 16);
    for (int r = 0; r < R; ++r) {
      const uint16_t mask = bits[r][s];
      const __m512 wv = expand16(mask, v[r]);
      v[r] += __builtin_popcount(mask);
      for (int m = 0; m < Mc; ++m) acc[m][r] = _mm512_fmadd_ps(wv, xs[m], acc[m][r]);
    }
  }
  for (int m = 0; m < Mc; ++m) {
    for (int r = 0; r < R; ++r) store_output(call, m0 + m, row0 + r, _mm512_reduce_add_ps(acc[m][r]));
  }
}

template <int R, class T>
void nm_tokens(const LinearCall& call, int64_t row0) {
  int64_t m = 0;
  for (; m + 4 <= call.M; m += 4) nm_rows<R, 4, T>(call, row0, m);
  switch (call.M - m) {
    case 3: nm_rows<R, 3, T>(call, row0, m); break;
    case 2: nm_rows<R, 2, T>(call, row0, m); break;
    case 1: nm_rows<R, 1, T>(call, row0, m); break;
    default: break;
  }
}

template <class T>
void nm(const LinearCall& call) {
  const int64_t row_end = std::min(call.w->rows, call.block_end * kLinearRowBlock);
  int64_t row = call.block_begin * kLinearRowBlock;
  for (; row + 4 <= row_end; row += 4) nm_tokens<4, T>(call, row);
  for (; row < row_end; ++row) nm_tokens<1, T>(call, row);
}

}  // namespace

void fill_linear_nm(LinearKernels& slots) {
  slots.nm_f32 = nm<float>;
  slots.nm_bf16 = nm<uint16_t>;
}

}  // namespace nmkit::cpu::avx512
