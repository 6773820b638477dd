// AVX2 nm kernels (any keep:group up to 16), f32 and bf16 weights. AVX2 has no expand, so each
// 8-wide step of K loads 8 consecutive values, places the first popcount(mask) of them in the lanes
// of the mask's set bits with one vpermps from a 256-entry table, and zeroes the other lanes.
// Values are read up to 7 past the row's last one: the packed layout keeps a slack of zeros there.
// POPCNT (in the tier's flags, src/cpu/CMakeLists.txt) keeps __builtin_popcount one instruction.
#include <immintrin.h>

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx2 {
namespace {

struct ExpandTable {
  // Plain arrays, not std::array: no library template is instantiated with this tier's flags.
  alignas(32) int32_t index[256][8];  // lane -> source value
  alignas(32) int32_t keep[256][8];   // lane set in the mask: all ones
};

constexpr ExpandTable make_table() {
  ExpandTable t{};
  for (int mask = 0; mask < 256; ++mask) {
    int next = 0;
    for (int lane = 0; lane < 8; ++lane) {
      const bool set = (mask >> lane) & 1;
      t.index[mask][lane] = set ? next++ : 0;
      t.keep[mask][lane] = set ? -1 : 0;
    }
  }
  return t;
}

constexpr ExpandTable kTable = make_table();

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

inline float reduce8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class T>
inline __m256 expand8(uint8_t mask, const T* p) {
  const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(kTable.index[mask]));
  const __m256 keep = _mm256_load_ps(reinterpret_cast<const float*>(kTable.keep[mask]));
  return _mm256_and_ps(_mm256_permutevar8x32_ps(load8(p), idx), keep);
}

template <int Mc, class T>
void nm_block(const LinearCall& call, int64_t b, int64_t m0) {
  const PackedLinear& w = *call.w;
  const float* x = static_cast<const float*>(call.x) + m0 * w.K_x;
  __m256 acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm256_setzero_ps();
  const int64_t superchunks = w.K_x / w.superchunk;
  for (int64_t c = 0; c < superchunks; ++c) {
    const T* v[kLinearRowBlock];
    const uint8_t* bits[kLinearRowBlock];
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t record = nm_record(w, b, c, r);
      v[r] = w.values.as<T>() + record * w.value_stride;
      bits[r] = w.meta.as<uint8_t>() + record * w.mask_stride;
    }
    const float* xc = x + c * w.superchunk;
    for (int64_t s = 0; s < w.superchunk / 8; ++s) {
      __m256 xs[Mc];
      for (int m = 0; m < Mc; ++m) xs[m] = _mm256_loadu_ps(xc + m * w.K_x + s * 8);
      for (int r = 0; r < kLinearRowBlock; ++r) {
        const uint8_t mask = bits[r][s];
        const __m256 wv = expand8(mask, v[r]);
        v[r] += __builtin_popcount(mask);
        for (int m = 0; m < Mc; ++m) acc[m][r] = _mm256_fmadd_ps(wv, xs[m], acc[m][r]);
      }
    }
  }
  for (int m = 0; m < Mc; ++m) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row < w.rows) store_output(call, m0 + m, row, reduce8(acc[m][r]));
    }
  }
}

template <class T>
void nm(const LinearCall& call) {
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    int64_t m = 0;
    for (; m + 2 <= call.M; m += 2) nm_block<2, T>(call, b, m);
    if (m < call.M) nm_block<1, T>(call, b, m);
  }
}

template <class T>
void nm_tile(const PackedLinear& w, int64_t b, float* dst, int64_t ld) {
  const int64_t superchunks = w.K_x / w.superchunk;
  for (int64_t c = 0; c < superchunks; ++c) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t record = nm_record(w, b, c, r);
      const T* v = w.values.as<T>() + record * w.value_stride;
      const uint8_t* bits = w.meta.as<uint8_t>() + record * w.mask_stride;
      for (int64_t s = 0; s < w.superchunk / 8; ++s) {
        const __m256 wv = expand8(bits[s], v);
        v += __builtin_popcount(bits[s]);
        const int64_t k = c * w.superchunk + 8 * s;
        _mm256_storeu_ps(dst + r * ld + k, wv);
      }
    }
  }
}

}  // namespace

void fill_linear_nm(LinearKernels& slots) {
  slots.nm_f32 = nm<float>;
  slots.nm_bf16 = nm<uint16_t>;
  slots.nm_tile_f32 = nm_tile<float>;
  slots.nm_tile_bf16 = nm_tile<uint16_t>;
}

}  // namespace nmkit::cpu::avx2
