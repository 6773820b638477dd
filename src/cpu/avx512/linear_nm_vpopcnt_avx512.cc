// AVX-512 nm kernels for CPUs with VPOPCNTDQ (Ice Lake and later, AMD Zen 4 and later), chosen at run
// time by fill_linear_nm. The lane ranks that place each value (the number of mask bits below a
// lane) come from one vpandd and one vpopcntd on the broadcast mask, instead of two table lookups
// and their scalar glue: about 9 instead of 14 operations per row and 16 K, which decides the speed
// of a memory-bound call since an nm kernel does far more work per weight byte than a dense one.
// The whole file may use VPOPCNTDQ (its own flags in src/cpu/CMakeLists.txt); nothing in it runs
// unless the CPU has it.
// Tried and rejected on Zen 5 (L1-resident microbenchmark, bf16 6:8, 2 rows): vpexpandw (VBMI2,
// register form) placing 32 bf16 values per 32-bit mask, then two widenings and two FMAs, took 5.7 ns
// per row and 32 K against 3.0 ns for the two vpermps steps here; vpermw with ranks from vpopcntw
// (BITALG) and one vdpbf16ps on bf16 activations took 2.7 ns, too little to pay for a new form; one
// vpermw per 16 K placing bf16 values straight into the high halves (pdep'd mask, no vpmovzxwd)
// took 3.25 ns.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
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

template <int Mc, class T>
void nm_block(const LinearCall& call, int64_t b, int64_t m0) {
  const PackedLinear& w = *call.w;
  const float* x = static_cast<const float*>(call.x) + m0 * w.K_x;
  // Lane j: the mask bits below bit j.
  const __m512i below = _mm512_setr_epi32(0x0, 0x1, 0x3, 0x7, 0xF, 0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF,
                                          0xFFF, 0x1FFF, 0x3FFF, 0x7FFF);
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
    // The block's values stream sequentially, but each 64 bytes take many operations here, so the
    // hardware prefetcher alone leaves memory idle while the kernel computes: fetch 4 KiB ahead.
    const auto* ahead = reinterpret_cast<const char*>(v[0]) + 4096;
    const int64_t record_bytes = kLinearRowBlock * w.value_stride * static_cast<int64_t>(sizeof(T));
    for (int64_t off = 0; off < record_bytes; off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
    const float* xc = x + c * w.superchunk;
    for (int64_t s = 0; s < w.superchunk / 16; ++s) {
      __m512 xs[Mc];
      for (int m = 0; m < Mc; ++m) xs[m] = _mm512_loadu_ps(xc + m * w.K_x + s * 16);
      for (int r = 0; r < kLinearRowBlock; ++r) {
        const uint32_t mask = bits[r][s];
        const __mmask16 k = _load_mask16(const_cast<__mmask16*>(bits[r] + s));
        const __m512i ranks = _mm512_popcnt_epi32(_mm512_and_si512(_mm512_set1_epi32(static_cast<int>(mask)), below));
        // The full-width load may read past the row's last value into the packed slack.
        const __m512 wv = _mm512_maskz_permutexvar_ps(k, ranks, load16(v[r]));
        v[r] += __builtin_popcount(mask);
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

// One 16-wide step: the lanes of the mask's set bits take the next values, which v moves past.
struct PopcntExpand {
  __m512i below = _mm512_setr_epi32(0x0, 0x1, 0x3, 0x7, 0xF, 0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF,
                                    0x1FFF, 0x3FFF, 0x7FFF);
  template <class T>
  __m512 operator()(uint32_t mask, const T*& v) const {
    const __m512i ranks = _mm512_popcnt_epi32(_mm512_and_si512(_mm512_set1_epi32(static_cast<int>(mask)), below));
    const __m512 wv = _mm512_maskz_permutexvar_ps(static_cast<__mmask16>(mask), ranks, load16(v));
    v += __builtin_popcount(mask);
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

// Row block b expanded into the dense f32 tile: every 16-wide step of every row is stored, so the
// tile needs no clearing.
// The slab forms (src/cpu/avx512/linear_nm_slabs.h): each K slab of a row block expanded once for all
// the call's tokens; the plan (src/linear/linear_plan.cc) says from how many tokens.
template <class T>
void nm_slab(const LinearCall& call) { nm_slabs<T>(call, PopcntExpand{}); }
// bf16 weights and bf16 activations (call.x_bf16) with vdpbf16ps.
void nm_slab_bf16x(const LinearCall& call) { nm_slabs_bf16x(call, PopcntExpand{}); }

template <class T>
void nm_tile(const PackedLinear& w, int64_t b, float* tile) {
  const __m512i below = _mm512_setr_epi32(0x0, 0x1, 0x3, 0x7, 0xF, 0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF,
                                          0xFFF, 0x1FFF, 0x3FFF, 0x7FFF);
  const int64_t superchunks = w.K_x / w.superchunk;
  for (int64_t c = 0; c < superchunks; ++c) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t record = nm_record(w, b, c, r);
      const T* v = w.values.as<T>() + record * w.value_stride;
      const auto* bits = reinterpret_cast<const uint16_t*>(w.meta.as<uint8_t>() + record * w.mask_stride);
      for (int64_t s = 0; s < w.superchunk / 16; ++s) {
        const uint32_t mask = bits[s];
        const __m512i ranks = _mm512_popcnt_epi32(_mm512_and_si512(_mm512_set1_epi32(static_cast<int>(mask)), below));
        const __m512 wv = _mm512_maskz_permutexvar_ps(static_cast<__mmask16>(mask), ranks, load16(v));
        v += __builtin_popcount(mask);
        const int64_t k = c * w.superchunk + 16 * s;
        _mm512_storeu_ps(tile + (k / kLinearChunk * kLinearRowBlock + r) * kLinearChunk + k % kLinearChunk, wv);
      }
    }
  }
}

}  // namespace

void fill_linear_nm_vpopcnt(LinearKernels& slots) {
  slots.nm_f32_slabs = nm_slab<float>;
  slots.nm_bf16_slabs = nm_slab<uint16_t>;
  slots.nm_bf16x_slabs = nm_slab_bf16x;
  slots.nm_f32 = nm<float>;
  slots.nm_bf16 = nm<uint16_t>;
  slots.nm_tile_f32 = nm_tile<float>;
  slots.nm_tile_bf16 = nm_tile<uint16_t>;
}

}  // namespace nmkit::cpu::avx512
