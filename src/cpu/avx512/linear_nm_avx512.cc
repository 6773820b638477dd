// AVX-512 nm kernels (any keep:group up to 16), f32 and bf16 weights. Each 16-wide step of K loads
// the step's 16 mask bits, places the next popcount(mask) values into their lanes with one masked
// vpermps, then runs the dense FMA. A block of 4 rows streams from two sequential arrays (values and
// masks interleaved by superchunk): 4 separate row streams were measured 2.5x slower than from L2.
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*(), which -Wuninitialized
// reports inside the header; the values are fully overwritten, so the warning is silenced here only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// POPCNT (added to this file's flags by src/cpu/CMakeLists.txt) keeps __builtin_popcount one instruction.
#include <immintrin.h>

#include "cpu/avx512/linear_nm_slabs.h"
#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// Byte j of rank[c][m] is c plus the number of set bits of the byte m below bit j: which of the next
// values lane j takes when bit j is set, c being the values taken by the lanes below the byte. 18 KiB,
// so it stays in L1 while the weights stream past (a 1 MiB table indexed by all 16 bits was measured
// 2x slower on streamed weights: its lines were evicted by them).
struct RankTable {
  uint64_t rank[9][256];
};

constexpr RankTable make_ranks() {
  RankTable t{};
  for (int c = 0; c <= 8; ++c) {
    for (int m = 0; m < 256; ++m) {
      uint64_t entry = 0;
      int below = c;
      for (int j = 0; j < 8; ++j) {
        entry |= static_cast<uint64_t>(below) << (8 * j);
        below += (m >> j) & 1;
      }
      t.rank[c][m] = entry;
    }
  }
  return t;
}

constexpr RankTable kRanks = make_ranks();

// The next popcount(mask) values placed in the lanes of the mask's set bits, other lanes zero: what
// vexpandps does, but on AMD Zen 4/5 vexpandps costs about 4x a vpermps (measured) and its memory
// form is microcoded, so one masked vpermps takes its indices from the rank table instead. The mask
// is read as bytes and as a mask register separately, since GCC otherwise moves it between the two
// through a stack slot (a store-forwarding stall per step). The full-width value load may read
// past the row's last value into the packed slack. Returns the number of values used in *count.
template <class T>
inline __m512 expand16(const uint16_t* mask_bits, const T* p, uint32_t* count) {
  const __mmask16 k = _load_mask16(const_cast<__mmask16*>(mask_bits));
  const auto* bytes = reinterpret_cast<const uint8_t*>(mask_bits);
  const uint32_t lo = bytes[0], hi = bytes[1];
  const auto below = static_cast<uint32_t>(__builtin_popcount(lo));
  *count = below + static_cast<uint32_t>(__builtin_popcount(hi));
  const __m128i ranks = _mm_set_epi64x(static_cast<long long>(kRanks.rank[below][hi]),
                                       static_cast<long long>(kRanks.rank[0][lo]));
  return _mm512_maskz_permutexvar_ps(k, _mm512_cvtepu8_epi32(ranks), load16(p));
}

template <int Mc, class T>
void nm_block(const LinearCall& call, int64_t b, int64_t m0) {
  const PackedLinear& w = *call.w;
  const float* x = static_cast<const float*>(call.x) + m0 * w.K_x;
  __m512 acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_ps();
  const int64_t superchunks = w.K_x / w.superchunk;
  for (int64_t c = 0; c < superchunks; ++c) {
    const T* v[kLinearRowBlock];
    const uint16_t* bits[kLinearRowBlock];
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t record = nm_record(w, b, c, r);
      v[r] = w.values.as<T>() + record * w.value_stride;
      bits[r] = reinterpret_cast<const uint16_t*>(w.meta.as<uint8_t>() + record * w.mask_stride);
    }
    const float* xc = x + c * w.superchunk;
    for (int64_t s = 0; s < w.superchunk / 16; ++s) {
      __m512 xs[Mc];
      for (int m = 0; m < Mc; ++m) xs[m] = _mm512_loadu_ps(xc + m * w.K_x + s * 16);
      for (int r = 0; r < kLinearRowBlock; ++r) {
        uint32_t used;
        const __m512 wv = expand16(bits[r] + s, v[r], &used);
        v[r] += used;
        for (int m = 0; m < Mc; ++m) acc[m][r] = _mm512_fmadd_ps(wv, xs[m], acc[m][r]);
      }
    }
  }
  for (int m = 0; m < Mc; ++m) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row < w.rows) store_output(call, m0 + m, row, _mm512_reduce_add_ps(acc[m][r]));
    }
  }
}

// One 16-wide step from the rank table: the lanes of the mask's set bits take the next values.
struct TableExpand {
  template <class T>
  __m512 operator()(const uint16_t& mask, const T*& v) const {
    uint32_t used;
    const __m512 wv = expand16(&mask, v, &used);
    v += used;
    return wv;
  }
};

template <class T>
void nm(const LinearCall& call) {
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    int64_t m = 0;
    for (; m + 4 <= call.M; m += 4) nm_block<4, T>(call, b, m);
    switch (call.M - m) {
      case 3: nm_block<3, T>(call, b, m); break;
      case 2: nm_block<2, T>(call, b, m); break;
      case 1: nm_block<1, T>(call, b, m); break;
      default: break;
    }
  }
}

// The slab forms (src/cpu/avx512/linear_nm_slabs.h): each K slab of a row block expanded once for all
// the call's tokens; the plan (src/linear/linear_plan.cc) says from how many tokens.
template <class T>
void nm_slab(const LinearCall& call) { nm_slabs<T>(call, TableExpand{}); }
// bf16 weights and bf16 activations (call.x_bf16) with vdpbf16ps.
void nm_slab_bf16x(const LinearCall& call) { nm_slabs_bf16x(call, TableExpand{}); }

template <class T>
void nm_tile(const PackedLinear& w, int64_t b, float* tile) {
  const int64_t superchunks = w.K_x / w.superchunk;
  for (int64_t c = 0; c < superchunks; ++c) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t record = nm_record(w, b, c, r);
      const T* v = w.values.as<T>() + record * w.value_stride;
      const auto* bits = reinterpret_cast<const uint16_t*>(w.meta.as<uint8_t>() + record * w.mask_stride);
      for (int64_t s = 0; s < w.superchunk / 16; ++s) {
        uint32_t used;
        const __m512 wv = expand16(bits + s, v, &used);
        v += used;
        const int64_t k = c * w.superchunk + 16 * s;
        _mm512_storeu_ps(tile + (k / kLinearChunk * kLinearRowBlock + r) * kLinearChunk + k % kLinearChunk, wv);
      }
    }
  }
}

}  // namespace

void fill_linear_nm(LinearKernels& slots) {
  // VPOPCNTDQ is not part of the tier; where present, a cheaper lane-rank computation replaces the
  // table lookups (src/cpu/avx512/linear_nm_vpopcnt_avx512.cc).
  if (__builtin_cpu_supports("avx512vpopcntdq")) fill_linear_nm_vpopcnt(slots);
  else fill_linear_nm_table(slots);
}

void fill_linear_nm_table(LinearKernels& slots) {
  slots.nm_tile_f32 = nm_tile<float>;
  slots.nm_tile_bf16 = nm_tile<uint16_t>;
  slots.nm_f32_slabs = nm_slab<float>;
  slots.nm_bf16_slabs = nm_slab<uint16_t>;
  slots.nm_bf16x_slabs = nm_slab_bf16x;
  slots.nm_f32 = nm<float>;
  slots.nm_bf16 = nm<uint16_t>;
}

}  // namespace nmkit::cpu::avx512
