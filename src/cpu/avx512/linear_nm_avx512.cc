// AVX-512 nm kernels (any keep:group up to 16), f32 and bf16 weights. Each 16-wide step of K loads
// the step's 16 mask bits, places the next popcount(mask) values into their lanes with one masked
// vpermps, then runs the dense FMA; rows are separate streams, 4 in flight.
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*(), which -Wuninitialized
// reports inside the header; the values are fully overwritten, so the warning is silenced here only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// POPCNT is not among the tier's compiler flags; without it __builtin_popcount becomes a bit-twiddling
// sequence on the critical path of every step. Every CPU with AVX2 has POPCNT.
#pragma GCC target("popcnt")
#include <immintrin.h>

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// Entry m (16 bytes): byte j is the number of set bits of m below bit j, i.e. which of the next
// values lane j takes when bit j is set. 1 MiB, built once when the tier's table is filled; an N:M
// weight touches few entries (784 for 6:8, 1296 for 2:4), so they stay in L1/L2.
const uint8_t* g_ranks = nullptr;

const uint8_t* build_ranks() {
  auto* table = new uint8_t[65536 * 16];
  for (uint32_t m = 0; m < 65536; ++m) {
    uint8_t below = 0;
    for (int j = 0; j < 16; ++j) {
      table[m * 16 + j] = below;
      below = static_cast<uint8_t>(below + ((m >> j) & 1));
    }
  }
  return table;
}

// The next popcount(mask) values placed in the lanes of the mask's set bits, other lanes zero: what
// vexpandps does, but on AMD Zen 4/5 vexpandps costs about 4x a vpermps (measured) and its memory
// form is microcoded, so one masked vpermps takes its indices from the rank table instead. The mask
// is loaded twice, into a mask register and a scalar, since GCC otherwise moves it between the two
// through a stack slot (a store-forwarding stall per step). The full-width value load may read
// past the row's last value into the packed slack.
template <class T>
inline __m512 expand16(const uint16_t* mask_bits, const T* p) {
  const __mmask16 k = _load_mask16(const_cast<__mmask16*>(mask_bits));
  const __m128i ranks = _mm_load_si128(reinterpret_cast<const __m128i*>(g_ranks + size_t{*mask_bits} * 16));
  return _mm512_maskz_permutexvar_ps(k, _mm512_cvtepu8_epi32(ranks), load16(p));
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
      const __m512 wv = expand16(bits[r] + s, v[r]);
      v[r] += __builtin_popcount(bits[r][s]);
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
  const int64_t row_end = row_limit(call);
  int64_t row = call.block_begin * kLinearRowBlock;
  for (; row + 4 <= row_end; row += 4) nm_tokens<4, T>(call, row);
  for (; row < row_end; ++row) nm_tokens<1, T>(call, row);
}

}  // namespace

void fill_linear_nm(LinearKernels& slots) {
  static const uint8_t* const ranks = build_ranks();  // once per process, never freed
  g_ranks = ranks;
  slots.nm_f32 = nm<float>;
  slots.nm_bf16 = nm<uint16_t>;
}

}  // namespace nmkit::cpu::avx512
