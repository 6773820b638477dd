// AVX-512 sparse24 kernels on token lanes (docs/design.md 8), f32 and bf16 weights, f32 activations, for
// calls of several tokens. The activations come transposed (call.xt: 16 tokens per ZMM at each K),
// so a kept value is one broadcast times the 16 tokens' activations at its K, found from its 2-bit
// position: only the kept half of the products is executed, and X is never gathered (the row-lane
// kernel of linear_avx512.cc spends one vpermt2ps on X per FMA, so from a few tokens on it cannot beat
// dense). Per kept value: a permute that broadcasts it from its row's register, two integer ops for
// its position, and per slab a 64-byte load of X^T and one FMA (docs/design.md 8.1 has the issue
// rates that make this the cheapest mix on this project's CPU).
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*(), which -Wuninitialized
// reports inside the header; the values are fully overwritten, so the warning is silenced here only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <bit>

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

// The 16 kept values of one row in one K chunk, as f32 lanes (bf16 -> f32 is exact: the bf16 bits are
// the high half of the f32).
inline __m512 chunk_values(const float* p) { return _mm512_load_ps(p); }
inline __m512 chunk_values(const uint16_t* p) {
  const __m256i bits = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// 8 rows' sums of one slab (lane t of rows[r] is token t) as 16 vectors of 8 rows, one per token:
// out[t] holds rows 0-7 of token t, so each token's 8 outputs are one 32-byte store instead of 8
// scattered 4-byte ones (the scattered stores took a third of the kernel's time at K = 576).
inline void rows_to_tokens(const __m512 (&rows)[8], __m256 (&out)[16]) {
  __m512 t[8], u[4], v[4];
  for (int p = 0; p < 4; ++p) {  // pairs of rows, interleaved: per 128-bit lane tokens (4j, 4j+1) / (4j+2, 4j+3)
    t[2 * p] = _mm512_unpacklo_ps(rows[2 * p], rows[2 * p + 1]);
    t[2 * p + 1] = _mm512_unpackhi_ps(rows[2 * p], rows[2 * p + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // per 128-bit lane j: rows 0-3 (u) and 4-7 (v) of token 4j + i
    u[2 * h] = _mm512_shuffle_ps(t[h], t[2 + h], 0x44);
    u[2 * h + 1] = _mm512_shuffle_ps(t[h], t[2 + h], 0xEE);
    v[2 * h] = _mm512_shuffle_ps(t[4 + h], t[6 + h], 0x44);
    v[2 * h + 1] = _mm512_shuffle_ps(t[4 + h], t[6 + h], 0xEE);
  }
  // u[i] / v[i] lane j hold token 4j + i; interleave the lanes of u and v (index bit 4 picks v).
  const __m512i lanes01 = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i lanes23 = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
  for (int i = 0; i < 4; ++i) {
    const __m512 low = _mm512_permutex2var_ps(u[i], lanes01, v[i]);   // tokens i, 4 + i
    const __m512 high = _mm512_permutex2var_ps(u[i], lanes23, v[i]);  // tokens 8 + i, 12 + i
    out[i] = _mm512_castps512_ps256(low);
    out[4 + i] = _mm512_extractf32x8_ps(low, 1);
    out[8 + i] = _mm512_castps512_ps256(high);
    out[12 + i] = _mm512_extractf32x8_ps(high, 1);
  }
}

// Writes the sums of R rows from block b for the tokens of S slabs from s0 (lane t of acc[r][s] is
// token 16 (s0 + s) + t), adding the bias as store_output does.
template <int R, int S>
void store_lanes(const LinearCall& call, int64_t b, int64_t s0, __m512 (&acc)[R][S]) {
  const PackedLinear& w = *call.w;
  const int64_t row0 = b * kLinearRowBlock;
  for (int s = 0; s < S; ++s) {
    const int64_t m0 = (s0 + s) * kTokenLanes;
    if constexpr (R == 8) {
      if (row0 + 8 <= w.rows && m0 + kTokenLanes <= call.M) {  // a whole 8 x 16 tile: rows per token
        __m512 rows[8];
        for (int r = 0; r < 8; ++r) rows[r] = acc[r][s];
        __m256 tokens[16];
        rows_to_tokens(rows, tokens);
        const __m256 bias = w.has_bias ? _mm256_loadu_ps(w.bias.as<float>() + row0) : _mm256_setzero_ps();
        for (int t = 0; t < kTokenLanes; ++t) {
          __m256 out = tokens[t];
          if (w.has_bias) out = _mm256_add_ps(out, bias);  // the exact f32 sum of store_output
          _mm256_storeu_ps(call.y + (m0 + t) * call.ldy + row0, out);
        }
        continue;
      }
    }
    for (int r = 0; r < R; ++r) {
      const int64_t row = row0 + r;
      if (row >= w.rows) break;
      alignas(64) float sums[kTokenLanes];
      _mm512_store_ps(sums, acc[r][s]);
      for (int t = 0; t < kTokenLanes && m0 + t < call.M; ++t) store_output(call, m0 + t, row, sums[t]);
    }
  }
}

// R rows (R/4 consecutive row blocks from b; R = 4 or 8) times S slabs of 16 tokens from slab s0.
// The loop runs over kept values outside and rows inside, so consecutive FMAs feed R*S different
// accumulators (one row after another would chain 16 FMAs on one register, 4 cycles each: measured
// 2x slower). The rows' meta words stay in registers, two per 64-bit word.
template <int R, int S, class T>
void lanes_block(const LinearCall& call, int64_t b, int64_t s0) {
  const PackedLinear& w = *call.w;
  const int64_t chunks = w.K_x / kLinearChunk;
  const int64_t slab_stride = w.K_x * kTokenLanes;
  const int64_t block_values = chunks * kLinearRowBlock * 16;  // values per row block
  const float* xt = call.xt + s0 * slab_stride;
  __m512 acc[R][S];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c) {
    const float* xc = xt + c * kLinearChunk * kTokenLanes;
    const int64_t rec = (b * chunks + c) * kLinearRowBlock;  // row 0 of block b; block b+1 is chunks*4 later
    const T* values = w.values.as<T>() + rec * 16;
    const uint32_t* meta = w.meta.as<uint32_t>() + rec;
    uint64_t words[R / 2];
#pragma GCC unroll 4
    for (int p = 0; p < R / 2; ++p) {
      const uint32_t* m = meta + (2 * p / kLinearRowBlock) * chunks * kLinearRowBlock + (2 * p) % kLinearRowBlock;
      words[p] = uint64_t{m[0]} | uint64_t{m[1]} << 32;
    }
    // Each row's 16 kept values in one register; value j is broadcast from it by a permute (lane j
    // everywhere), which runs beside the loads, where a broadcast from memory is a third load next to
    // the two FMAs' loads of X^T, and loads are what this CPU runs out of first (one 64-byte load a
    // cycle on the Zen 5 VM: 0.73 FMA a cycle with memory broadcasts, 0.94 with register ones, in an
    // asm loop of the same mix).
    __m512 row_values[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      row_values[r] = chunk_values(values + (r / kLinearRowBlock) * block_values + (r % kLinearRowBlock) * 16);
    }
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      const char* group = reinterpret_cast<const char*>(xc + (j >> 1) * 4 * kTokenLanes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        // Field j of row r's word times 64 bytes (one token-lane row of X^T): the even row's word is
        // the low half of words[r/2], the odd row's the high half. A rotation (rorx, which leaves its
        // source alone) brings the field to bits [6, 8), so each offset costs two integer ops.
        const int shift = ((r % 2) * 32 + 2 * j - 6) & 63;
        const auto offset = static_cast<size_t>(std::rotr(words[r / 2], shift) & 0xC0u);
        const __m512 v = _mm512_permutexvar_ps(_mm512_set1_epi32(j), row_values[r]);
#pragma GCC unroll 2
        for (int s = 0; s < S; ++s) {
          const float* x = reinterpret_cast<const float*>(group + offset) + s * slab_stride;
          acc[r][s] = _mm512_fmadd_ps(v, _mm512_load_ps(x), acc[r][s]);
        }
      }
    }
  }
  store_lanes<R, S>(call, b, s0, acc);
}

// Pairs of slabs share each broadcast and position. X^T (256 KiB per slab at K = 4096) streams from
// L2. Measured and rejected: K tiles of X^T kept in L1 with partial sums (the weight stream becomes
// 4 KiB pieces 32 KiB apart, which the prefetchers do not follow across pages: 1.35x slower, still
// 1.1x with software prefetch), software prefetch of the weights and loading the next chunk's meta
// words a chunk ahead (no gain), and for bf16 weights with bf16 activations a vdpbf16ps form whose
// X side holds, per group of 4 K, the activation pairs of all six 2:4 nibbles (2.65 ms at M=16 and
// 4096x4096 against 2.85 for the row-lane vdpbf16ps kernel, 43 against 42 at M=256: no gain for
// 720 KiB of pairs per 16 tokens).
template <int R, class T>
void lanes_rows(const LinearCall& call, int64_t b) {
  const int64_t slabs = (call.M + kTokenLanes - 1) / kTokenLanes;
  int64_t s = 0;
  for (; s + 2 <= slabs; s += 2) lanes_block<R, 2, T>(call, b, s);
  if (s < slabs) lanes_block<R, 1, T>(call, b, s);
}

template <class T>
void run(const LinearCall& call) {
  int64_t b = call.block_begin;
  for (; b + 2 <= call.block_end; b += 2) lanes_rows<8, T>(call, b);
  if (b < call.block_end) lanes_rows<4, T>(call, b);
}

}  // namespace

void fill_linear_token_lanes(LinearKernels& slots) {
  slots.sparse24_f32_lanes = run<float>;
  slots.sparse24_bf16_lanes = run<uint16_t>;
}

}  // namespace nmkit::cpu::avx512
