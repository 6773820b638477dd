// AVX-512 nm kernel for a few to a few dozen tokens per call (included by the nm kernel files of the
// tier, each with its own expansion). The streaming nm kernel expands a row block's masks again for
// every 4 tokens, so its cost grows with M at the rate of the expansion, not of the FMAs: at M=16 it
// ran at 0.36x of dense f32 (4096x4096, 6:8). Here each K slab of a row block is expanded once into
// an f32 tile that stays in L1 (4 rows x up to 1024 K, 16 KiB), and every group of 4 tokens then runs
// the dense 4x4 FMA block on it; the 16 partial sums of a token group are kept in a small buffer
// between slabs (16 stores and loads per 4x4x1024 FMAs), so the tile never leaves L1 and the
// activations are read from L2 once per row block, as the dense kernel reads them.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {


// K of one slab: about 1024 (the L1 tile of 4 rows is 16 KiB of 48), a whole number of superchunks.
inline int64_t nm_slab_superchunks(const PackedLinear& w) { return std::max<int64_t>(1, 1024 / w.superchunk); }

// Tokens m0..m0+Mc of one slab: acc holds the partial sums of the token group (Mc x 4 vectors).
template <int Mc>
inline void nm_slab_tokens(const LinearCall& call, const float* tile, int64_t k0, int64_t steps, int64_t m0,
                           __m512* acc_buf, bool first) {
  const PackedLinear& w = *call.w;
  const float* x = static_cast<const float*>(call.x) + m0 * w.K_x + k0;
  __m512 acc[Mc][kLinearRowBlock];
  for (int m = 0; m < Mc; ++m) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      acc[m][r] = first ? _mm512_setzero_ps() : acc_buf[m * kLinearRowBlock + r];
    }
  }
  for (int64_t s = 0; s < steps; ++s) {
    __m512 xs[Mc];
    for (int m = 0; m < Mc; ++m) xs[m] = _mm512_loadu_ps(x + m * w.K_x + s * 16);
    const float* t = tile + s * kLinearRowBlock * 16;
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const __m512 wv = _mm512_load_ps(t + r * 16);
      for (int m = 0; m < Mc; ++m) acc[m][r] = _mm512_fmadd_ps(wv, xs[m], acc[m][r]);
    }
  }
  for (int m = 0; m < Mc; ++m) {
    for (int r = 0; r < kLinearRowBlock; ++r) acc_buf[m * kLinearRowBlock + r] = acc[m][r];
  }
}

// expand(mask, v) returns the 16 lanes of a 16-bit mask step filled from *v and advances v.
template <class T, class Expand>
void nm_slabs(const LinearCall& call, const Expand& expand) {
  const PackedLinear& w = *call.w;
  const int64_t superchunks = w.K_x / w.superchunk;
  const int64_t per_slab = nm_slab_superchunks(w);
  thread_local AlignedBytes tile;     // (slab K / 16, 4 rows) vectors
  thread_local AlignedBytes sums;     // (M, 4 rows) vectors
  const auto tile_bytes = static_cast<size_t>(per_slab * w.superchunk * kLinearRowBlock * 4);
  const auto sum_bytes = static_cast<size_t>(call.M * kLinearRowBlock * 64);
  if (tile.size < tile_bytes) tile = AlignedBytes::zeros(tile_bytes);
  if (sums.size < sum_bytes) sums = AlignedBytes::zeros(sum_bytes);
  float* t = tile.as<float>();
  __m512* partial = sums.as<__m512>();
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    for (int64_t c0 = 0; c0 < superchunks; c0 += per_slab) {
      const int64_t c1 = std::min(superchunks, c0 + per_slab);
      const int64_t steps_per_chunk = w.superchunk / 16;
      for (int64_t c = c0; c < c1; ++c) {
        for (int r = 0; r < kLinearRowBlock; ++r) {
          const int64_t record = nm_record(w, b, c, r);
          const T* v = w.values.as<T>() + record * w.value_stride;
          const auto* bits = reinterpret_cast<const uint16_t*>(w.meta.as<uint8_t>() + record * w.mask_stride);
          float* dst = t + ((c - c0) * steps_per_chunk * kLinearRowBlock + r) * 16;
          for (int64_t s = 0; s < steps_per_chunk; ++s) {
            _mm512_store_ps(dst + s * kLinearRowBlock * 16, expand(bits[s], v));
          }
        }
      }
      const int64_t k0 = c0 * w.superchunk;
      const int64_t steps = (c1 - c0) * steps_per_chunk;
      const bool first = c0 == 0;
      int64_t m = 0;
      for (; m + 4 <= call.M; m += 4) nm_slab_tokens<4>(call, t, k0, steps, m, &partial[m * kLinearRowBlock], first);
      switch (call.M - m) {
        case 3: nm_slab_tokens<3>(call, t, k0, steps, m, &partial[m * kLinearRowBlock], first); break;
        case 2: nm_slab_tokens<2>(call, t, k0, steps, m, &partial[m * kLinearRowBlock], first); break;
        case 1: nm_slab_tokens<1>(call, t, k0, steps, m, &partial[m * kLinearRowBlock], first); break;
        default: break;
      }
    }
    for (int64_t m = 0; m < call.M; ++m) {
      for (int r = 0; r < kLinearRowBlock; ++r) {
        const int64_t row = b * kLinearRowBlock + r;
        if (row < w.rows) store_output(call, m, row, _mm512_reduce_add_ps(partial[m * kLinearRowBlock + r]));
      }
    }
  }
}

// bf16 weights times bf16 activations (call.x_bf16): the slab tile holds the expanded values as bf16
// (two expanded 16-wide steps narrowed exactly with vcvtne2ps2bf16, the values being bf16 already), and
// one vdpbf16ps per row, token and 32 K does the products of two f32 FMAs: for the tokens where
// oneDNN's bf16 matmul (bf16 activations) otherwise runs 2-3x ahead of the f32-FMA slabs.
template <int Mc>
inline void nm_slab_tokens_bf16x(const LinearCall& call, const uint16_t* tile, int64_t k0, int64_t pairs,
                                 int64_t m0, __m512* acc_buf, bool first) {
  const PackedLinear& w = *call.w;
  const uint16_t* x = call.x_bf16 + m0 * w.K_x + k0;
  __m512 acc[Mc][kLinearRowBlock];
  for (int m = 0; m < Mc; ++m) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      acc[m][r] = first ? _mm512_setzero_ps() : acc_buf[m * kLinearRowBlock + r];
    }
  }
  for (int64_t p = 0; p < pairs; ++p) {
    __m512i xs[Mc];
    for (int m = 0; m < Mc; ++m) xs[m] = _mm512_loadu_si512(x + m * w.K_x + p * 32);
    const uint16_t* t = tile + p * kLinearRowBlock * 32;
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const __m512i wv = _mm512_load_si512(t + r * 32);
      for (int m = 0; m < Mc; ++m) acc[m][r] = _mm512_dpbf16_ps(acc[m][r], (__m512bh)wv, (__m512bh)xs[m]);
    }
  }
  for (int m = 0; m < Mc; ++m) {
    for (int r = 0; r < kLinearRowBlock; ++r) acc_buf[m * kLinearRowBlock + r] = acc[m][r];
  }
}

template <class Expand>
void nm_slabs_bf16x(const LinearCall& call, const Expand& expand) {
  const PackedLinear& w = *call.w;
  const int64_t superchunks = w.K_x / w.superchunk;
  const int64_t per_slab = nm_slab_superchunks(w);
  thread_local AlignedBytes tile;  // (slab K / 32, 4 rows) vectors of 32 bf16
  thread_local AlignedBytes sums;  // (M, 4 rows) vectors
  const auto tile_bytes = static_cast<size_t>(per_slab * w.superchunk * kLinearRowBlock * 2);
  const auto sum_bytes = static_cast<size_t>(call.M * kLinearRowBlock * 64);
  if (tile.size < tile_bytes) tile = AlignedBytes::zeros(tile_bytes);
  if (sums.size < sum_bytes) sums = AlignedBytes::zeros(sum_bytes);
  auto* t = tile.as<uint16_t>();
  __m512* partial = sums.as<__m512>();
  const int64_t pairs_per_chunk = w.superchunk / 32;  // a superchunk is a multiple of 32
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    for (int64_t c0 = 0; c0 < superchunks; c0 += per_slab) {
      const int64_t c1 = std::min(superchunks, c0 + per_slab);
      for (int64_t c = c0; c < c1; ++c) {
        for (int r = 0; r < kLinearRowBlock; ++r) {
          const int64_t record = nm_record(w, b, c, r);
          const uint16_t* v = w.values.as<uint16_t>() + record * w.value_stride;
          const auto* bits = reinterpret_cast<const uint16_t*>(w.meta.as<uint8_t>() + record * w.mask_stride);
          uint16_t* dst = t + ((c - c0) * pairs_per_chunk * kLinearRowBlock + r) * 32;
          for (int64_t p = 0; p < pairs_per_chunk; ++p) {
            const __m512 lo = expand(bits[2 * p], v);
            const __m512 hi = expand(bits[2 * p + 1], v);
            _mm512_store_si512(dst + p * kLinearRowBlock * 32, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
          }
        }
      }
      const int64_t k0 = c0 * w.superchunk;
      const int64_t pairs = (c1 - c0) * pairs_per_chunk;
      const bool first = c0 == 0;
      int64_t m = 0;
      for (; m + 4 <= call.M; m += 4) nm_slab_tokens_bf16x<4>(call, t, k0, pairs, m, &partial[m * kLinearRowBlock], first);
      switch (call.M - m) {
        case 3: nm_slab_tokens_bf16x<3>(call, t, k0, pairs, m, &partial[m * kLinearRowBlock], first); break;
        case 2: nm_slab_tokens_bf16x<2>(call, t, k0, pairs, m, &partial[m * kLinearRowBlock], first); break;
        case 1: nm_slab_tokens_bf16x<1>(call, t, k0, pairs, m, &partial[m * kLinearRowBlock], first); break;
        default: break;
      }
    }
    for (int64_t m = 0; m < call.M; ++m) {
      for (int r = 0; r < kLinearRowBlock; ++r) {
        const int64_t row = b * kLinearRowBlock + r;
        if (row < w.rows) store_output(call, m, row, _mm512_reduce_add_ps(partial[m * kLinearRowBlock + r]));
      }
    }
  }
}

}  // namespace
}  // namespace nmkit::cpu::avx512
