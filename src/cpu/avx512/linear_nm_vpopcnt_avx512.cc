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

#include "cpu/avx512/linear_nm-inl.h"

namespace nmkit::cpu::avx512 {
namespace {

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

}  // namespace

void fill_linear_nm_vpopcnt(LinearKernels& slots) { fill_nm_slots<PopcntExpand>(slots); }

}  // namespace nmkit::cpu::avx512
