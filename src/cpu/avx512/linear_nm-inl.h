// The AVX-512 nm kernels, one body for every way of expanding a 16-bit mask step (gemma.cpp's -inl.h
// pattern): included by linear_nm_avx512.cc (lane ranks from a table, any CPU of the tier) and by
// linear_nm_vpopcnt_avx512.cc (ranks from vpopcntd), each of which defines its Expand:
//   struct Expand { template <class T> __m512 operator()(const uint16_t& mask, const T*& v) const; };
// returning the 16 lanes of the mask's set bits filled from the next values at v (other lanes zero)
// and advancing v past them. The streaming kernel (a few tokens), the slab kernels (more tokens,
// src/cpu/avx512/linear_nm_slabs.h) and the tile expansion all step through the masks with it.
#pragma once

#include <immintrin.h>

#include <cstdint>

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

// Tokens m0..m0+Mc of row block b, streaming the block's masks and values once: the kernel for up to
// 4 tokens per call, whose sums stay in registers. kFixedStep: the group divides 16, so every 16-wide
// step of a record holds 16 / group * keep values (a padding group has no mask bits: its slots expand
// to zero), a superchunk is one chunk of 32 K, and a row's values start at a known offset; otherwise each row's pointer advances by its
// mask's count. (With the pointers in an array the loop stored them, and the sums, every step:
// docs/data.md "The gap, found".)
template <int Mc, class T, bool kFixedStep, class Expand>
void nm_block(const LinearCall& call, int64_t b, int64_t m0, const Expand& expand) {
  const PackedLinear& w = *call.w;
  const float* x = static_cast<const float*>(call.x) + m0 * w.K_x;
  __m512 acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_ps();
  // A group dividing 16 divides the chunk, so its superchunk is the chunk: a constant step count,
  // which GCC unrolls into one loop (a loop inside the superchunk loop made it store the sums).
  const int64_t superchunks = w.K_x / w.superchunk, steps = kFixedStep ? kLinearChunk / 16 : w.superchunk / 16;
  const int64_t value_stride = w.value_stride, mask_halves = w.mask_stride / 2, superchunk = w.superchunk, K_x = w.K_x;
  const int64_t per_step = 16 / w.pattern.group * w.pattern.keep;  // used when kFixedStep
  // The block's records of a superchunk are adjacent, one superchunk's after the other's.
  const T* const values = w.values.as<T>() + nm_record(w, b, 0, 0) * value_stride;
  const uint16_t* const masks = reinterpret_cast<const uint16_t*>(w.meta.as<uint8_t>()) + nm_record(w, b, 0, 0) * mask_halves;
  for (int64_t c = 0; c < superchunks; ++c) {
    const T* v0 = values + c * kLinearRowBlock * value_stride;
    const uint16_t* bits = masks + c * kLinearRowBlock * mask_halves;
    prefetch_ahead(v0, kLinearRowBlock * value_stride * static_cast<int64_t>(sizeof(T)));
    const float* xc = x + c * superchunk;
    const T* v[kLinearRowBlock];
    for (int r = 0; r < kLinearRowBlock; ++r) v[r] = v0 + r * value_stride;
    for (int64_t s = 0; s < steps; ++s) {
      __m512 xs[Mc];
      for (int m = 0; m < Mc; ++m) xs[m] = _mm512_loadu_ps(xc + m * K_x + s * 16);
      for (int r = 0; r < kLinearRowBlock; ++r) {
        __m512 wv;
        if constexpr (kFixedStep) {
          const T* p = v0 + r * value_stride + s * per_step;
          wv = expand(bits[r * mask_halves + s], p);
        } else {
          wv = expand(bits[r * mask_halves + s], v[r]);
        }
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

template <class T, bool kFixedStep, class Expand>
void nm_stream_rows(const LinearCall& call, const Expand& expand) {
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    int64_t m = 0;
    for (; m + 4 <= call.M; m += 4) nm_block<4, T, kFixedStep>(call, b, m, expand);
    switch (call.M - m) {
      case 3: nm_block<3, T, kFixedStep>(call, b, m, expand); break;
      case 2: nm_block<2, T, kFixedStep>(call, b, m, expand); break;
      case 1: nm_block<1, T, kFixedStep>(call, b, m, expand); break;
      default: break;
    }
  }
}

template <class T, class Expand>
void nm_stream(const LinearCall& call) {
  const Expand expand{};
  if (16 % call.w->pattern.group == 0) {
    nm_stream_rows<T, true>(call, expand);
  } else {
    nm_stream_rows<T, false>(call, expand);
  }
}

// The slab forms: each K slab of a row block expanded once for all the call's tokens; the plan
// (src/linear/linear_plan.cc) says from how many tokens.
template <class T, class Expand>
void nm_slab(const LinearCall& call) { nm_slabs<T>(call, Expand{}); }
// bf16 weights and bf16 activations (call.x_bf16) with vdpbf16ps.
template <class Expand>
void nm_slab_bf16x(const LinearCall& call) { nm_slabs_bf16x(call, Expand{}); }

// Row block b expanded into dense f32 rows (dst + r * ld): every 16-wide step of every row is stored,
// so dst needs no clearing.
template <class T, class Expand>
void nm_tile(const PackedLinear& w, int64_t b, float* dst, int64_t ld) {
  const Expand expand{};
  const int64_t superchunks = w.K_x / w.superchunk;
  for (int64_t c = 0; c < superchunks; ++c) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t record = nm_record(w, b, c, r);
      const T* v = w.values.as<T>() + record * w.value_stride;
      const auto* bits = reinterpret_cast<const uint16_t*>(w.meta.as<uint8_t>() + record * w.mask_stride);
      for (int64_t s = 0; s < w.superchunk / 16; ++s) {
        const __m512 wv = expand(bits[s], v);
        const int64_t k = c * w.superchunk + 16 * s;
        _mm512_storeu_ps(dst + r * ld + k, wv);
      }
    }
  }
}

template <class Expand>
void fill_nm_slots(LinearKernels& slots) {
  slots.nm_f32 = nm_stream<float, Expand>;
  slots.nm_bf16 = nm_stream<uint16_t, Expand>;
  slots.nm_f32_slabs = nm_slab<float, Expand>;
  slots.nm_bf16_slabs = nm_slab<uint16_t, Expand>;
  slots.nm_bf16x_slabs = nm_slab_bf16x<Expand>;
  slots.nm_tile_f32 = nm_tile<float, Expand>;
  slots.nm_tile_bf16 = nm_tile<uint16_t, Expand>;
}

}  // namespace
}  // namespace nmkit::cpu::avx512
