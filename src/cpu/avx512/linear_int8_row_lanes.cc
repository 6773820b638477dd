// AVX-512 INT8 sparse24 on row lanes (docs/design.md 8.4): each int32 lane of a ZMM accumulates one
// of 16 rows for one token. A record of the row-lane form (linear/linear_row_lanes.h) holds, for one
// pair of 4-groups of a 64-wide K window, each row's 4 kept codes and their positions in the window;
// per token, one vpermb gathers those 4 activation bytes for all 16 rows from the window's 64 codes,
// and one vpdpbusd multiplies them by the kept codes. So only the kept products are executed, at one
// shuffle and one dot per 64 of them (the blocked 2:4 kernel of linear_int8_avx512.cc decodes the
// positions per token and reduces each row's lanes at the end). Activation codes are offset by 128
// (vpdpbusd takes unsigned bytes) and 128 times the row's code sum is subtracted: the integer sums,
// and with the same epilogue the outputs, equal the reference's bit for bit.
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

#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

// Tokens whose accumulators and activation windows stay in registers together (2 x 12 ZMM, plus the
// record's positions and codes). Measured in an L1-resident loop on the project's Zen 5: 8 and 12
// tokens both about 0.7 shuffle+dot pairs a cycle.
constexpr int kMaxTokens = 12;
constexpr int kPairsPerWindow = kRowLaneWindow / 8;

// Y rows [16 g, 16 g + 16) of `tokens` tokens from m0: int32 sums, then the INT8 epilogue
// (cpu/linear_common.h int8_output and store_output, lane by lane: the same f32 operations in the
// same order, so the same bits).
template <int T>
void group_tokens(const LinearCall& call, int64_t g, int64_t m0) {
  const PackedLinear& w = *call.w;
  const int64_t windows = w.K_x / kRowLaneWindow;
  const uint8_t* record = w.values.as<uint8_t>() + g * windows * kPairsPerWindow * kRowLaneRecordBytes;
  const int8_t* x = static_cast<const int8_t*>(call.x) + m0 * w.K_x;
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_si512();
  for (int64_t wi = 0; wi < windows; ++wi) {
    __m512i window[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      window[t] = _mm512_xor_si512(_mm512_loadu_si512(x + t * w.K_x + wi * kRowLaneWindow), sign);
    }
#pragma GCC unroll 8
    for (int p = 0; p < kPairsPerWindow; ++p, record += kRowLaneRecordBytes) {
      const __m512i positions = _mm512_load_si512(record);
      const __m512i codes = _mm512_load_si512(record + 64);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm512_dpbusd_epi32(acc[t], _mm512_permutexvar_epi8(positions, window[t]), codes);
      }
    }
  }
  const int64_t row0 = g * kRowLaneRows;
  const int64_t here = std::min<int64_t>(kRowLaneRows, w.rows - row0);
  const __mmask16 rows = static_cast<__mmask16>((1u << here) - 1);
  const __m512i sums = _mm512_maskz_loadu_epi32(rows, w.row_sum.as<int32_t>() + row0);
  const __m512 w_scale = _mm512_maskz_loadu_ps(rows, w.row_scale.as<float>() + row0);
  const __m512 bias = w.has_bias ? _mm512_maskz_loadu_ps(rows, w.bias.as<float>() + row0) : _mm512_setzero_ps();
  const __m512i offset = _mm512_slli_epi32(sums, 7);  // 128 * sum
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(call.x_scale[m0 + t]), w_scale);
    __m512 y = _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[t], offset)));
    if (w.has_bias) y = _mm512_add_ps(y, bias);
    _mm512_mask_storeu_ps(call.y + (m0 + t) * call.ldy + row0, rows, y);
  }
}

template <int... T>
constexpr auto make_table(std::integer_sequence<int, T...>) {
  return std::array<void (*)(const LinearCall&, int64_t, int64_t), sizeof...(T)>{group_tokens<T + 1>...};
}

constexpr auto kByTokens = make_table(std::make_integer_sequence<int, kMaxTokens>{});

// Records of a run of 16-row groups that the call keeps in L2 while every token block passes over
// them.
constexpr int64_t kGroupRunBytes = int64_t{512} << 10;

// The call's 16-row groups in runs of about kGroupRunBytes of records, and within a run, token block
// by token block (near-equal blocks of at most kMaxTokens: 17 tokens are 8 + 9, not 12 + 5), each
// block over every group of the run. Group by group over all tokens instead wrote each group's 16
// outputs for token after token, lines ldy floats apart: with 49152 rows every one of them fell in
// the same L1 and L2 set, and the stores took a third of the kernel's time (perf, 256 tokens).
void sparse24_row_lanes(const LinearCall& call) {
  const int64_t blocks = (call.M + kMaxTokens - 1) / kMaxTokens;
  const int64_t group_bytes = call.w->K_x / kRowLaneWindow * kPairsPerWindow * kRowLaneRecordBytes;
  const int64_t run = std::max<int64_t>(1, kGroupRunBytes / group_bytes);
  for (int64_t g0 = call.block_begin; g0 < call.block_end; g0 += run) {
    const int64_t g1 = std::min(call.block_end, g0 + run);
    int64_t m = 0;
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t tokens = (call.M - m) / (blocks - i);
      const auto block = kByTokens[static_cast<size_t>(tokens - 1)];
      for (int64_t g = g0; g < g1; ++g) block(call, g, m);
      m += tokens;
    }
  }
}

}  // namespace

void fill_linear_int8_row_lanes(LinearKernels& slots) { slots.sparse24_i8_row_lanes = sparse24_row_lanes; }

}  // namespace nmkit::cpu::avx512
