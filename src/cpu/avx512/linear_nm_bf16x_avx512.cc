// AVX-512 nm kernel for bf16 weights times bf16 activations (call.x_bf16), a few tokens per call:
// each 32-wide step of K places the step's kept values in the lanes of its 32 mask bits with one
// vpexpandw (VBMI2) and multiplies the 32 pairs with one vdpbf16ps, so a row and 32 K cost one load,
// one expansion and one dot where the f32-activation kernels expand and widen 16 values at a time.
// The expansion takes its values from a register: the memory form, which GCC folds the load into
// unless kept apart, reads only the kept values but ran no faster here and is microcoded on AMD.
// Every superchunk (lcm(group, 32) K) is a whole number of 32-bit mask words. The full-width value
// load may read past the row's last value into the packed slack (cpu/linear_kernels.h kLinearSlack).
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

// Tokens m0..m0+Mc of row block b, streaming the block's masks and values once.
template <int Mc>
void nm_bf16x_block(const LinearCall& call, int64_t b, int64_t m0) {
  const PackedLinear& w = *call.w;
  const uint16_t* x = call.x_bf16 + m0 * w.K_x;
  __m512 acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_ps();
  const int64_t superchunks = w.K_x / w.superchunk, steps = w.superchunk / 32;
  for (int64_t c = 0; c < superchunks; ++c) {
    const uint16_t* v[kLinearRowBlock];
    const uint8_t* bits[kLinearRowBlock];
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t record = nm_record(w, b, c, r);
      v[r] = w.values.as<uint16_t>() + record * w.value_stride;
      bits[r] = w.meta.as<uint8_t>() + record * w.mask_stride;
    }
    prefetch_ahead(v[0], kLinearRowBlock * w.value_stride * 2);
    const uint16_t* xc = x + c * w.superchunk;
    for (int64_t s = 0; s < steps; ++s) {
      __m512i xs[Mc];
      for (int m = 0; m < Mc; ++m) xs[m] = _mm512_loadu_si512(xc + m * w.K_x + s * 32);
      for (int r = 0; r < kLinearRowBlock; ++r) {
        uint32_t mask;
        std::memcpy(&mask, bits[r] + 4 * s, 4);
        __m512i raw = _mm512_loadu_si512(v[r]);
        asm("" : "+v"(raw));  // keeps the load apart: GCC would fold it into the slow memory form
        const __m512i wv = _mm512_maskz_expand_epi16(mask, raw);
        v[r] += __builtin_popcount(mask);
        for (int m = 0; m < Mc; ++m) {
          acc[m][r] = _mm512_dpbf16_ps(acc[m][r], reinterpret_cast<__m512bh>(wv), reinterpret_cast<__m512bh>(xs[m]));
        }
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

void nm_bf16x_stream(const LinearCall& call) {
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    int64_t m = 0;
    for (; m + 4 <= call.M; m += 4) nm_bf16x_block<4>(call, b, m);
    switch (call.M - m) {
      case 3: nm_bf16x_block<3>(call, b, m); break;
      case 2: nm_bf16x_block<2>(call, b, m); break;
      case 1: nm_bf16x_block<1>(call, b, m); break;
      default: break;
    }
  }
}

}  // namespace

void fill_linear_nm_bf16x(LinearKernels& slots) { slots.nm_bf16x = nm_bf16x_stream; }

}  // namespace nmkit::cpu::avx512
