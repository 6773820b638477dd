// AVX-512 sparse24 on row lanes (docs/design.md 8.4): each 32-bit lane of a ZMM accumulates one of
// 16 rows for one token. A record of the row-lane form (linear/linear_row_lanes.h) holds each row's
// next 4 bytes of kept values within a window of 64 activation bytes, and their positions in the
// window; per token, one permute gathers the matching activations of all 16 rows from the window
// and one dot instruction multiplies them by the kept values. So only the kept products execute,
// at one shuffle and one dot per 64 (INT8: vpermb, vpdpbusd) or 32 (bf16: vpermw, vdpbf16ps) of
// them; the blocked kernels of linear_int8_avx512.cc and linear_avx512.cc decode the positions once
// per token and reduce each row's lanes at the end.
// INT8: activation codes are offset by 128 (vpdpbusd takes unsigned bytes) and 128 times the row's
// code sum is subtracted: the integer sums, and with the same epilogue the outputs, equal the
// reference's bit for bit. bf16: exact products of bf16 values summed in f32, as the other
// bf16-activation kernels.
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*(), which
// -Wuninitialized reports inside the header; the values are fully overwritten.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

// Tokens whose accumulators and activation windows stay in registers together (2 x 12 ZMM, plus the
// record's positions and values). Measured in an L1-resident loop on the project's Zen 5: 8 and 12
// tokens both about 0.7 shuffle+dot pairs a cycle.
constexpr int kMaxTokens = 12;

// Row group g's first row, and the mask of its lanes that hold rows (the last group may be short).
struct Rows {
  int64_t row0;
  __mmask16 mask;
};

Rows rows_of(const LinearCall& call, int64_t g) {
  const int64_t row0 = g * kRowLaneRows;
  const int64_t here = std::min<int64_t>(kRowLaneRows, call.w->rows - row0);
  return {row0, static_cast<__mmask16>((1u << here) - 1)};
}

// INT8: Y rows of group g for T tokens from m0: int32 sums, then the INT8 epilogue
// (cpu/linear_common.h int8_output and store_output, lane by lane: the same f32 operations in the
// same order, so the same bits).
template <int T>
void int8_tokens(const LinearCall& call, int64_t g, int64_t m0) {
  const PackedLinear& w = *call.w;
  const int64_t windows = row_lane_windows(w);
  const uint8_t* record = w.values.as<uint8_t>() + g * row_lane_group_bytes(w);
  const int8_t* x = static_cast<const int8_t*>(call.x) + m0 * w.K_x;
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_si512();
  for (int64_t wi = 0; wi < windows; ++wi) {
    __m512i window[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      window[t] = _mm512_xor_si512(_mm512_loadu_si512(x + t * w.K_x + wi * kRowLaneWindowBytes), sign);
    }
#pragma GCC unroll 8
    for (int p = 0; p < kRowLaneRecords; ++p, record += kRowLaneRecordBytes) {
      const __m512i positions = _mm512_load_si512(record);
      const __m512i codes = _mm512_load_si512(record + 64);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm512_dpbusd_epi32(acc[t], _mm512_permutexvar_epi8(positions, window[t]), codes);
      }
    }
  }
  const Rows rows = rows_of(call, g);
  const __m512i sums = _mm512_maskz_loadu_epi32(rows.mask, w.row_sum.as<int32_t>() + rows.row0);
  const __m512 w_scale = _mm512_maskz_loadu_ps(rows.mask, w.row_scale.as<float>() + rows.row0);
  const __m512 bias = w.has_bias ? _mm512_maskz_loadu_ps(rows.mask, w.bias.as<float>() + rows.row0) : _mm512_setzero_ps();
  const __m512i offset = _mm512_slli_epi32(sums, 7);  // 128 * sum
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(call.x_scale[m0 + t]), w_scale);
    __m512 y = _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[t], offset)));
    if (w.has_bias) y = _mm512_add_ps(y, bias);
    _mm512_mask_storeu_ps(call.y + (m0 + t) * call.ldy + rows.row0, rows.mask, y);
  }
}

// bf16 weights times bf16 activations (call.x_bf16): f32 sums, plus the bias.
template <int T>
void bf16x_tokens(const LinearCall& call, int64_t g, int64_t m0) {
  const PackedLinear& w = *call.w;
  constexpr int64_t kWindow = kRowLaneWindowBytes / 2;  // bf16 values
  const int64_t windows = row_lane_windows(w);
  const uint8_t* record = w.values.as<uint8_t>() + g * row_lane_group_bytes(w);
  const uint16_t* x = call.x_bf16 + m0 * w.K_x;
  __m512 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t wi = 0; wi < windows; ++wi) {
    __m512i window[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) window[t] = _mm512_loadu_si512(x + t * w.K_x + wi * kWindow);
#pragma GCC unroll 8
    for (int q = 0; q < kRowLaneRecords; ++q, record += kRowLaneRecordBytes) {
      const __m512i positions = _mm512_load_si512(record);
      const __m512bh values = reinterpret_cast<__m512bh>(_mm512_load_si512(record + 64));
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm512_dpbf16_ps(acc[t], reinterpret_cast<__m512bh>(_mm512_permutexvar_epi16(positions, window[t])),
                                  values);
      }
    }
  }
  const Rows rows = rows_of(call, g);
  const __m512 bias = w.has_bias ? _mm512_maskz_loadu_ps(rows.mask, w.bias.as<float>() + rows.row0) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const __m512 y = w.has_bias ? _mm512_add_ps(acc[t], bias) : acc[t];
    _mm512_mask_storeu_ps(call.y + (m0 + t) * call.ldy + rows.row0, rows.mask, y);
  }
}

using GroupTokens = void (*)(const LinearCall&, int64_t, int64_t);

template <template <int> class Kernel, int... T>
constexpr std::array<GroupTokens, sizeof...(T)> table(std::integer_sequence<int, T...>) {
  return {Kernel<T + 1>::run...};
}

template <int T>
struct Int8 {
  static void run(const LinearCall& call, int64_t g, int64_t m0) { int8_tokens<T>(call, g, m0); }
};
template <int T>
struct Bf16x {
  static void run(const LinearCall& call, int64_t g, int64_t m0) { bf16x_tokens<T>(call, g, m0); }
};

// Records of a run of 16-row groups that the call keeps in L2 while every token block passes over
// them.
constexpr int64_t kGroupRunBytes = int64_t{512} << 10;

// The call's 16-row groups in runs of about kGroupRunBytes of records, and within a run, token block
// by token block (near-equal blocks of at most kMaxTokens: 17 tokens are 8 + 9, not 12 + 5), each
// block over every group of the run. Group by group over all tokens instead wrote each group's 16
// outputs for token after token, lines ldy floats apart: with 49152 rows every one of them fell in
// the same L1 and L2 set, and the stores took a third of the kernel's time (perf, 256 tokens).
template <template <int> class Kernel>
void row_lanes(const LinearCall& call) {
  static constexpr auto by_tokens = table<Kernel>(std::make_integer_sequence<int, kMaxTokens>{});
  const int64_t blocks = (call.M + kMaxTokens - 1) / kMaxTokens;
  const int64_t run = std::max<int64_t>(1, kGroupRunBytes / row_lane_group_bytes(*call.w));
  for (int64_t g0 = call.block_begin; g0 < call.block_end; g0 += run) {
    const int64_t g1 = std::min(call.block_end, g0 + run);
    int64_t m = 0;
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t tokens = (call.M - m) / (blocks - i);
      const GroupTokens block = by_tokens[static_cast<size_t>(tokens - 1)];
      for (int64_t g = g0; g < g1; ++g) block(call, g, m);
      m += tokens;
    }
  }
}

}  // namespace

void fill_linear_row_lanes(LinearKernels& slots) {
  slots.sparse24_i8_row_lanes = row_lanes<Int8>;
  slots.sparse24_bf16x_row_lanes = row_lanes<Bf16x>;
}

}  // namespace nmkit::cpu::avx512
