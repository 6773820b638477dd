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

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

// Tokens m0..m0+Mc of row block b, streaming the block's masks and values once. kOneStep: the group
// divides 32, so a superchunk is one 32-wide step and the kernel is one loop over them; otherwise
// each step of a superchunk counts its mask bits to find its values. Masks are read as typed words:
// with byte-wise reads (which may alias the sums) and per-row pointers in an array, GCC stored the
// accumulators every step (docs/data.md "The gap, found").
template <int Mc, bool kOneStep>
void nm_bf16x_block(const LinearCall& call, int64_t b, int64_t m0) {
  const PackedLinear& w = *call.w;
  const uint16_t* x = call.x_bf16 + m0 * w.K_x;
  __m512 acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_ps();
  const int64_t superchunks = w.K_x / w.superchunk, steps = w.superchunk / 32;
  const int64_t mask_words = w.mask_stride / 4, value_stride = w.value_stride, superchunk = w.superchunk, K_x = w.K_x;
  // The block's records of a superchunk are adjacent, one superchunk's after the other's.
  const uint16_t* const values = w.values.as<uint16_t>() + nm_record(w, b, 0, 0) * value_stride;
  const uint32_t* const masks = reinterpret_cast<const uint32_t*>(w.meta.as<uint8_t>()) + nm_record(w, b, 0, 0) * mask_words;
  for (int64_t c = 0; c < superchunks; ++c) {
    const uint16_t* v = values + c * kLinearRowBlock * value_stride;
    const uint32_t* bits = masks + c * kLinearRowBlock * mask_words;
    const uint16_t* xc = x + c * superchunk;
    if constexpr (kOneStep) {
      prefetch_ahead(v, kLinearRowBlock * 64);  // at most 32 values a row: a constant count of lines
      __m512i xs[Mc];
      for (int m = 0; m < Mc; ++m) xs[m] = _mm512_loadu_si512(xc + m * K_x);
      for (int r = 0; r < kLinearRowBlock; ++r) {
        __m512i raw = _mm512_loadu_si512(v + r * value_stride);
        asm("" : "+v"(raw));  // keeps the load apart: GCC would fold it into the slow memory form
        const __m512i wv = _mm512_maskz_expand_epi16(bits[r], raw);
        for (int m = 0; m < Mc; ++m) {
          acc[m][r] = _mm512_dpbf16_ps(acc[m][r], reinterpret_cast<__m512bh>(wv), reinterpret_cast<__m512bh>(xs[m]));
        }
      }
    } else {
      prefetch_ahead(v, kLinearRowBlock * value_stride * 2);
      int64_t offset[kLinearRowBlock] = {};
      for (int64_t s = 0; s < steps; ++s) {
        __m512i xs[Mc];
        for (int m = 0; m < Mc; ++m) xs[m] = _mm512_loadu_si512(xc + m * K_x + s * 32);
        for (int r = 0; r < kLinearRowBlock; ++r) {
          const uint32_t mask = bits[r * mask_words + s];
          __m512i raw = _mm512_loadu_si512(v + r * value_stride + offset[r]);
          asm("" : "+v"(raw));
          const __m512i wv = _mm512_maskz_expand_epi16(mask, raw);
          offset[r] += __builtin_popcount(mask);
          for (int m = 0; m < Mc; ++m) {
            acc[m][r] = _mm512_dpbf16_ps(acc[m][r], reinterpret_cast<__m512bh>(wv), reinterpret_cast<__m512bh>(xs[m]));
          }
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

template <bool kOneStep>
void nm_bf16x_rows(const LinearCall& call) {
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    int64_t m = 0;
    for (; m + 4 <= call.M; m += 4) nm_bf16x_block<4, kOneStep>(call, b, m);
    switch (call.M - m) {
      case 3: nm_bf16x_block<3, kOneStep>(call, b, m); break;
      case 2: nm_bf16x_block<2, kOneStep>(call, b, m); break;
      case 1: nm_bf16x_block<1, kOneStep>(call, b, m); break;
      default: break;
    }
  }
}

void nm_bf16x_stream(const LinearCall& call) {
  if (32 % call.w->pattern.group == 0) {
    nm_bf16x_rows<true>(call);
  } else {
    nm_bf16x_rows<false>(call);
  }
}

}  // namespace

void fill_linear_nm_bf16x(LinearKernels& slots) { slots.nm_bf16x = nm_bf16x_stream; }

}  // namespace nmkit::cpu::avx512
