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
// POPCNT (in the tier's flags, src/cpu/CMakeLists.txt) keeps __builtin_popcount one instruction.
#include <immintrin.h>

#include "cpu/avx512/linear_nm-inl.h"

namespace nmkit::cpu::avx512 {
namespace {

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

}  // namespace

void fill_linear_nm(LinearKernels& slots) {
  // VPOPCNTDQ is not part of the tier; where present, a cheaper lane-rank computation replaces the
  // table lookups (src/cpu/avx512/linear_nm_vpopcnt_avx512.cc).
  if (__builtin_cpu_supports("avx512vpopcntdq")) fill_linear_nm_vpopcnt(slots);
  else fill_linear_nm_table(slots);
  fill_linear_nm_bf16x(slots);
}

void fill_linear_nm_table(LinearKernels& slots) { fill_nm_slots<TableExpand>(slots); }

}  // namespace nmkit::cpu::avx512
