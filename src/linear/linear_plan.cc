// The plan: every token-count threshold of SparseLinear, and the measurement that chose it.
//
// Measurements: `nmkit bench linear` (2 threads, same-round ratios of the median of 5 interleaved
// rounds) on this project's machine (Zen 5 VM, AVX-512 with BF16/VNNI, no AMX). Figures marked
// "quiet" were taken on an idle machine; "noisy" ones while 8 other jobs shared its 2 cores, where
// absolute times are meaningless and only the ordering of same-round ratios is kept.
#include "linear/linear_plan.h"

#include <algorithm>

#include "cpu/kernel_table.h"
#include "linear/linear_driver.h"
#include "nmkit/cpu.h"
#include "nmkit/threads.h"
#include "core/thread_costs.h"

namespace nmkit::linear {
namespace {

using cpu::PackedLinear;

// --- Forms -------------------------------------------------------------------------------------

// A slid INT8 weight (SparseLinear::slid) runs its unslid dense codes from this many tokens. The 2:4
// kernel over K_prime executes (N-1)/N of the dense products but gathers the activations once per
// token (vpermt2b), which costs about what the VNNI it saves does, over K_prime = 1.5 K for 6:8.
// Quiet, 4096x4096 6:8, ratios to dense int8: slid 0.97-0.99x at 2-4 tokens (unslid 1.00-1.05x),
// 0.87x at 8 (0.96x), 0.75x at 16 (1.01x), 0.59x at 256 (0.99x).
constexpr int64_t kUnslidInt8Tokens = 8;

// An nm keep:2N weight packed slid (f32/bf16, SparseLinear::nm on AVX-512) runs its nm pack from
// this many tokens. Quiet, 4096x4096 6:8, ratios to nmkit dense: f32 activations slid 1.35x / nm
// 1.25x at 1 token, 1.23x / 0.92x at 16, 1.21x / 0.90x at 32, 0.92x / 0.94x at 64, 0.91x / 0.97x at
// 256; bf16 activations (vdpbf16ps) slid 0.97-1.19x / nm 0.69-0.87x at 1 token, 1.15x / 1.12x at 16,
// 1.07x / 1.20x at 32, 1.14x / 1.49x at 64.
constexpr int64_t kUnslidNmTokensF32x = 64;
constexpr int64_t kUnslidNmTokensBf16x = 32;

// A sparse24 INT8 weight (not slid) on a tier without INT8 tiles or row lanes (AVX2, scalar; oneDNN
// runs INT8 only with VNNI, so not there either) runs its codes packed dense (many_tokens_form: the
// same integer sums, bit for bit, for one byte per weight more) from this many tokens on rows of at
// most kDenseInt8ShortK, and from kDenseInt8Tokens on longer ones: its own kernel expands each
// group of 4 codes once per token. Quiet, 2026-11-25 (`NMKIT_ISA=avx2 nmkit bench linear --shapes
// smollm2,7b --m 2,4,8,16 --dtype int8 --pattern 2:4 --no-baselines`, then `--shapes smollm2 --m
// 1,16,64,256`, sparse24 / dense int8, same kernel tier): K = 576 0.88-1.38x at 2 tokens,
// 0.86-0.90x at 4, 0.86-0.90x at 8, 0.88-0.95x at 16, 0.79-0.87x at 64-256; K >= 1536 1.21-1.79x at
// 2, 1.11-1.23x at 4, 0.94-1.10x at 8, 0.89-0.97x at 16, 0.82-0.90x at 64-256.
constexpr int64_t kDenseInt8ShortRowTokens = 4;
constexpr int64_t kDenseInt8Tokens = 16;
constexpr int64_t kDenseInt8ShortK = 1024;

// --- nmkit's own kernels -------------------------------------------------------------------------

// sparse24 f32/bf16 weights run on token lanes from this many tokens (the row-lane kernels shuffle
// the activations once per token and FMA). Quiet, 4096x4096: equal at 8 tokens, 1.4-1.9x faster
// from 16.
constexpr int64_t kTokenLaneTokens = 8;

// From this many tokens sparse24 f32 and bf16 weights (f32 activations) stay on token lanes even where
// oneDNN's GEMM on their dense copy would otherwise run (OnednnFrom below): since each kept value is
// broadcast from a register (loads, not FMAs, were the limit: src/cpu/avx512/linear_token_lanes.cc),
// token lanes lead oneDNN at every M measured from 16. Quiet, 2026-11-25 (`nmkit bench linear --shapes
// 7b,smollm2 --m 8,16,64,256,512 --pattern 2:4 --dtype f32 --own-kernels`, ratios to the best dense
// kernel, token lanes / oneDNN on the dense copy): 4096x4096 1.33 / - at 16, 1.54 / 1.00 at 64, 1.43 /
// 0.99 at 256, 1.46 / 0.99 at 512; 11008x4096 1.32-1.63; 4096x11008 1.31-1.59 (after whole-slab
// token blocks, sparse_linear.cc); SmolLM2's 576-wide shapes 0.95-1.30 at 16 (oneDNN 0.94-1.03),
// 1.03-1.34 at 64-512, but 0.82-0.97 at 8 (oneDNN leads there, half of each 16-token slab being
// padding) and 0.85 on 192x576 at 64-512 (0.12-0.6 ms calls: then X^T's transpose and its sharing
// between the cores weighed; 1.15-1.37x in two full runs since the register transpose and
// kLanesSplitTokens below).
constexpr int64_t kTokenLanesLeadTokens = 16;

// Token-lane calls of at least this many tokens (a 32-token slab pair per thread) on a weight of at
// most this many streamed bytes split their tokens between the threads, each running every row,
// instead of their rows. Split by rows, each core reads all of X^T and half of it was written by the
// other core; split by tokens, each reads only the X^T it wrote but streams the whole weight, which
// pays while the weight is small. Measured (quiet, 2026-11-25, 2:4 f32, `nmkit bench linear
// --pattern 2:4 --dtype f32 --m 64,128,256,512`, ms rows / tokens): 192x576 (240 KiB) 0.086/0.054 at
// 64, 0.32/0.21 at 256, 0.64/0.39 at 512; 576x576 0.18/0.16, 0.64/0.64, 1.32/1.16; 1536x576 and
// 576x1536 (1.9 MiB) 3-15% faster at 64-512; 4096x4096 (8.5 MiB) within 3%, 11008x4096 and
// 4096x11008 -8% to +8%, 49152x576 -4% at 64 and +12% at 256: no consistent gain past a few MiB.
constexpr int64_t kLanesSplitTokens = 64;
constexpr size_t kLanesSplitWeightBytes = size_t{4} << 20;

// The AVX-512 nm kernels expand each K slab once for all tokens from this many tokens; up to 4 the
// streaming kernel, which keeps 4 tokens' sums in registers, expands each mask once per call too.
constexpr int64_t kSlabTokens = 5;

// Row blocks are decompressed into dense tiles for the dense micro-kernel from this many tokens:
// bf16 dense (widened once instead of once per 4 tokens), INT8 sparse24 (vpermt2b per token costs
// as much as a second VNNI), nm on tiers without slabs, and sparse24 bf16 with bf16 activations on
// tiers without vdpbf16ps (AVX2: its own kernel ran 0.59-0.74x of dense bf16 on tiles at 64-256
// tokens, tiles 0.97-1.07x; `NMKIT_ISA=avx2 nmkit bench linear --shapes smollm2 --m 64,256 --dtype
// bf16 --pattern 2:4`, 2026-11-25). Below it the scalar decompression is not repaid. On AVX-512 nm
// slabs ran 0.90-0.99x of dense f32 at 64 and 256 tokens where tiles ran 0.63-0.92x (quiet), so nm
// takes no tiles there.
constexpr int64_t kTileTokens = 64;

// --- oneDNN --------------------------------------------------------------------------------------

// From these token counts a call runs oneDNN's matmul on a dense copy of the weight in oneDNN's
// prepacked layout (built by the first such call; for a sparse weight, its decompression): the
// compute-bound regime, where oneDNN's register-blocked brgemm beats nmkit's kernels on this CPU.
//   Quiet (issue 12, 4096x4096, vs the best dense kernel incl. oneDNN): nmkit dense f32 0.88x at 16
//   and 0.44x at 256, bf16 0.40x and 0.23x, int8 0.70x at 256; 2:4 1.35x (f32) and 1.23x (int8) at
//   16 but 0.74x (f32), 0.48x (bf16), 0.70x (int8) at 256; 6:8 0.41x at 256; bf16 2:4 0.70x at 16.
//   Token lanes ran 1.8x nmkit dense f32 at 16-256, so ~0.8x oneDNN once compute-bound.
//   Noisy (`nmkit bench linear --rows 4096 --k 4096 --own-kernels --no-baselines --m 1,2,4,...,256`
//   with every threshold at 1, so both routes ran in the same rounds; times in ms, own / oneDNN):
//     dense f32     M=1 19/27, 2 46/44, 4 65/53, 8 108/72, 16 106/54, 64 244/176, 256 1094/727
//     dense bf16    M=1 35/53, 2 32/52, 4 44/48, 8 41/32, 16 120/74, 64 325/230 (f32 copy)
//     2:4 f32       M=4 55/44, 8 74/76, 16 60/72, 32 91/135, 64 141/170, 128 322/405, 256 682/777
//     2:4 bf16      M=4 22/48, 8 53/32, 16 76/66, 32 93/158, 64 162/227, 128 316/371 (f32 copy)
//     2:4 bf16 x    M=4 25/51, 8 11/27, 16 82/64, 32 100/95, 64 149/156, 128 307/233
//     6:8 f32       M=1 19/44, 2 59/51, 4 70/63, 8 116/72, 16 72/75, 32 143/119, 64 248/195
//     6:8 bf16      M=2 35/51, 4 51/35, 8 39/38, 16 96/84, 32 120/182, 64 320/220
//     6:8 bf16 x    M=2 24/51, 4 33/44, 8 38/35, 16 95/56, 32 168/124, 64 195/144
//   The noisy figures scatter by 2x between neighbours (the machine's memory bandwidth was ~3 GB/s,
//   a tenth of its quiet value) and load hurts oneDNN's OpenMP barriers more than nmkit's pool, so
//   where they disagree with the quiet ones (token lanes past 64) the quiet ones decide. INT8, noisy
//   same-round own / oneDNN baseline (`nmkit bench linear --rows 4096 --k 4096`, ms): dense M=1
//   0.6/13.6, 4 1.0/15.8, 8 18/32, 16 26/38, 32 32/40, 64 124/116, 128 125/148, 256 248/236; own 2:4
//   int8 (tiles from 64) 96 at 64; oneDNN's int8 stays far behind for few tokens (41-73 ms at 1-8
//   tokens with every threshold at 1). So INT8 moved at 64 (dense, slid's unslid codes, 2:4), where
//   the quiet ratios (0.70x at 256) say oneDNN leads, until the quiet re-measurement below (4). 2:4 int8 moved at 128 until 2026-11-23 19:00:
//   `NMKIT_THREADS=1 nmkit bench linear --shapes smollm2 --m 64,128 --dtype int8 --pattern 2:4
//   --own-kernels` (load ~6, one thread so that no barrier waits on a descheduled thread) gave its
//   tiles 0.52-0.71x of dense int8 on oneDNN at M=64 (576x576 0.55x, 192x576 0.52x, 1536x576 0.52x,
//   576x1536 0.71x, 49152x576 0.60x), below the floor of issue 12 (a sparse form never slower than
//   the dense one), and oneDNN on the 2:4 weight's dense copy 0.90-1.08x of dense at M=128.
//   nm f32 and bf16 (f32 activations) moved at 32 until then: the same one-thread run at M=16
//   (`--shapes smollm2,7b --m 16 --pattern 6:8 --own-kernels`) gave 6:8 f32 as slid token lanes
//   0.61-0.90x of dense f32 on oneDNN (576x576 0.65x, 192x576 0.61x, 1536x576 0.68x, 576x1536
//   0.72x, 4096x4096 0.75x, 11008x4096 0.90x) and 6:8 bf16 0.75-1.00x; on oneDNN's dense copy they
//   run dense's GEMM (1.0x).
//   2 to 16 tokens, re-measured 2026-11-23 22:00 (quiet, `nmkit bench linear --shapes 7b,smollm2 --m
//   2,4,8,16 --pattern 2:4 (then 6:8) --own-kernels` with every threshold below at 2, so both routes
//   ran in the same rounds; ratios to the best dense kernel of the run, 8 shapes, own / oneDNN):
//     dense int8    M=2 0.82-1.25 / 1.00 (own ahead only on the 4 SmolLM2 shapes), 4 0.69-1.13 / 1.00,
//                   8 0.56-0.86 / 1.00: oneDNN's int8 brgemm (no scale attributes; nmkit applies the
//                   scales after) leads from 4 tokens. (The bench's oneDNN int8 baseline, with runtime
//                   output scales, takes a slower path below 64 tokens.)
//     2:4 int8      M=2 1.05-1.52 / 0.96-1.17, 4 0.87-1.15 / 1.00-1.06, 8 0.60-0.88 / 0.94-1.03
//     slid 6:8 int8 M=2 0.68-1.20 / 0.68-1.10, 4 0.75-0.94 / 0.88-1.39
//     2:4 f32       M=8 0.72-1.04 / 0.93-1.03, 16 0.88-0.98 / 0.91-1.01 at K = 576 but 1.16-1.36 /
//                   0.86-1.01 at K = 4096 and 11008 (token lanes keep up once the rows are long)
//     nm 6:8 f32    M=2 0.90-1.13 / 0.41-0.87, 4 0.57-0.91 / 0.82-1.06
//     nm 6:8 bf16   M=4 0.29-0.73 / 0.26-0.54, 8 0.23-0.44 / 0.41-0.62 (f32 activations: both run
//                   against the bf16 GEMM at half its speed); bf16 x M=2 0.56-1.18 / 0.42-0.78, 4
//                   0.49-0.96 / 0.54-1.08
//     dense bf16    M=4 0.56-1.05 / 0.21-0.54, 8 0.41-0.64 / 0.40-0.61 (f32 activations)
//     2:4 bf16 x    M=4 0.74-1.57 / 0.60-0.99, 8 0.80-0.98 / 0.71-1.00
//   The same comparison on an Intel Xeon VM with AMX (2 cores; oneDNN's int8 and bf16 GEMMs on AMX
//   tiles), 2026-11-24 (`nmkit bench linear --shapes 7b,smollm2 --m 4,8 --pattern 2:4 (then 6:8)
//   --dtype int8 --own-kernels`, own / oneDNN):
//     2:4 int8      M=4 0.99-1.65 / 1.00 on all 8 shapes; 8 1.05-1.11 / 1.00 on the 7B shapes but
//                   0.53-0.91 / 1.00 on SmolLM2's: so oneDNN from 8 tokens (on the AMD machine M=4
//                   was a tie, 0.87-1.15 / 1.00-1.06).
//     dense int8    M=4 1.11-1.22 / 1.00 with K >= 4096, 0.91-1.11 / 1.00 with K = 576-1536
//     slid 6:8 int8 M=4 1.08-1.17 / 0.83-1.00 with K >= 4096, 0.80-0.97 / 0.95-1.03 with K = 576-1536
//   so dense and slid INT8 with long rows (kLongRowK) keep nmkit's kernels at 4 tokens too.
// Thresholds per weight as the user built it (an nm weight packed slid counts as nm, whichever of
// its forms a call reads), dtype and activation type. sparse24 f32 and bf16 with f32 activations stay
// on token lanes from kTokenLanesLeadTokens whatever these say (so their oneDNN range is only short
// rows' [8, 16) tokens).
struct OnednnFrom {
  int64_t dense_f32, dense_bf16, dense_bf16x, dense_int8, dense_int8_long_rows;
  int64_t sparse24_f32, sparse24_f32_short_rows, sparse24_bf16, sparse24_bf16x, sparse24_int8;
  int64_t nm_f32, nm_bf16, nm_bf16x, nm_int8;
  int64_t slid_int8, slid_int8_long_rows;
};
constexpr OnednnFrom kOnednnFrom{
    /*dense_f32=*/4, /*dense_bf16=*/8, /*dense_bf16x=*/4, /*dense_int8=*/4, /*dense_int8_long_rows=*/8,
    /*sparse24_f32=*/64, /*sparse24_f32_short_rows=*/8, /*sparse24_bf16=*/64, /*sparse24_bf16x=*/8,
    /*sparse24_int8=*/8,
    /*nm_f32=*/4, /*nm_bf16=*/8, /*nm_bf16x=*/4, /*nm_int8=*/8,
    /*slid_int8=*/4, /*slid_int8_long_rows=*/8,
};
// Rows of K at or above this count as long: for sparse24 f32 (token lanes lose to oneDNN below it
// from 8 tokens) and for dense and slid INT8 (nmkit's kernels lead at 4 tokens on it).
constexpr int64_t kLongRowK = 2048;

// Tokens up to which a call is bound by the weight bytes it streams: f32 weights give 2M flops per 4
// bytes; at ~450 GFLOP/s (2 cores x 2 FMA x 16 lanes x 2 x ~3.5 GHz) over ~50 GB/s the balance is
// ~9 flops per byte, i.e. M ~ 18.
constexpr int64_t kMemoryBoundTokens = 16;

// Whether a call of bf16 weights runs oneDNN's bf16 GEMM: with bf16 activations where oneDNN has
// one. bf16 weights with f32 activations run an f32 copy (the bf16 GEMM would round X to bf16), and
// so do bf16 activations where oneDNN has no bf16 GEMM (AVX2), on X rounded to bf16: the products are
// exact in f32 either way. Under NMKIT_ISA=avx2, 576x576 at 64 tokens: 0.28 ms against 0.41 on
// nmkit's bf16 tiles (2026-11-25).
bool runs_bf16_gemm(DType dtype, bool bf16_x) {
  return dtype == DType::BF16 && bf16_x && onednn_runs(MatmulType::Bf16);
}

// The table's threshold for w (AVX-512 measurements).
int64_t table_onednn_from(const PackedLinear& w) {
  const OnednnFrom& t = kOnednnFrom;
  const bool bf16x = w.bf16_x;
  // bf16 x bf16 on the f32 copy (runs_bf16_gemm) takes the thresholds of bf16 weights with f32
  // activations (under NMKIT_ISA=avx2, dense at 4 tokens: the f32 GEMM 0.17-0.56x of nmkit's bf16
  // kernel); sparse24 keeps its own (its kernel: 0.60-0.78x at 16 tokens, oneDNN 0.83-1.04x).
  const bool bf16_gemm = runs_bf16_gemm(w.dtype, bf16x);
  if (w.slide) {
    if (w.dtype == DType::I8) return w.K >= kLongRowK ? t.slid_int8_long_rows : t.slid_int8;
    return w.dtype == DType::BF16 ? (bf16_gemm ? t.nm_bf16x : t.nm_bf16) : t.nm_f32;  // nm packed slid
  }
  switch (w.kind) {
    case WeightFormat::Dense:
      if (w.dtype == DType::I8) return w.K >= kLongRowK ? t.dense_int8_long_rows : t.dense_int8;
      if (w.dtype == DType::BF16) return bf16_gemm ? t.dense_bf16x : t.dense_bf16;
      return bf16x ? t.dense_bf16x : t.dense_f32;
    case WeightFormat::Sparse24:
      if (w.dtype == DType::I8) return t.sparse24_int8;
      if (w.dtype == DType::BF16) return bf16x ? t.sparse24_bf16x : t.sparse24_bf16;
      return w.K >= kLongRowK ? t.sparse24_f32 : t.sparse24_f32_short_rows;
    case WeightFormat::NM:
      if (w.dtype == DType::I8) return t.nm_int8;
      if (w.dtype == DType::BF16) return bf16_gemm ? t.nm_bf16x : t.nm_bf16;
      return t.nm_f32;
  }
  return INT64_MAX;
}

// From how many tokens oneDNN may run w.
int64_t onednn_from(const PackedLinear& w) { return table_onednn_from(w); }

// The token-lane kernel of sparse24 weights of `dtype` on a tier (null where the tier has none).
cpu::LinearFn token_lanes_kernel(const cpu::LinearKernels& k, DType dtype) {
  return dtype == DType::F32 ? k.sparse24_f32_lanes : dtype == DType::BF16 ? k.sparse24_bf16_lanes : nullptr;
}

// Whether oneDNN's GEMM runs a call of M tokens: from onednn_from(w) tokens, except where token lanes
// lead it (sparse24 f32, and bf16 with f32 activations, from kTokenLanesLeadTokens).
bool onednn_leads(const PackedLinear& w, const cpu::LinearKernels& k, int64_t M) {
  if (M < onednn_from(w)) return false;
  const bool bf16_pairs = w.bf16_x && w.dtype == DType::BF16;  // bf16 x bf16 has its own kernel
  const bool lanes_lead = w.kind == WeightFormat::Sparse24 && !w.slide && !bf16_pairs &&
                          token_lanes_kernel(k, w.dtype) != nullptr && M >= kTokenLanesLeadTokens;
  return !lanes_lead;
}

MatmulType matmul_type(DType dtype, bool bf16_x) {
  if (dtype == DType::I8) return MatmulType::Int8;
  return runs_bf16_gemm(dtype, bf16_x) ? MatmulType::Bf16 : MatmulType::F32;
}

// oneDNN runs at one tier per process (onednn_tier(): the detected one, or AVX2 under NMKIT_ISA=avx2),
// so a layer of another tier (LinearOptions::tier) keeps nmkit's kernels of its tier. Below AVX-512
// oneDNN's f32 GEMM on plain weights is its jit sgemm, whose kernels for the tail of the token
// dimension sum in another order: one token's outputs then depend on its place in the call (a model
// fed the same sequence twice in one batch got different logits for the second), so AVX2 keeps
// nmkit's kernels too.
bool onednn_allowed(const LinearLayer& layer, MatmulType type) {
  const PackedLinear& w = *layer.packed;
  return layer.onednn && w.tier >= IsaTier::Avx512 && w.tier == onednn_tier() && onednn_runs(type);
}


// From how many tokens a sparse24 or nm INT8 weight runs nmkit's dense INT8 kernel on tiles: where the
// tier expands a row block into a tile itself, from kTileTokens; else (the portable decompression)
// as the dense copy it replaces did (kDenseInt8Tokens).
int64_t int8_tiles_from(const PackedLinear& w, cpu::TileI8Fn tier_tile) {
  if (tier_tile != nullptr) return kTileTokens;
  return w.K <= kDenseInt8ShortK ? kDenseInt8ShortRowTokens : kDenseInt8Tokens;
}

}  // namespace

LinearPlan plan_for(const LinearLayer& layer, int64_t M) {
  const PackedLinear& w = *layer.packed;
  const cpu::LinearKernels& kernels = cpu::kernels_for(w.tier).linear;
  LinearPlan plan;
  plan.kind = w.kind;
  plan.dtype = w.dtype;
  plan.matmul = matmul_type(plan.dtype, w.bf16_x);
  if (onednn_leads(w, kernels, M) && onednn_allowed(layer, plan.matmul)) {
    plan.route = Route::Onednn;
    // oneDNN starts the whole OpenMP team unless told otherwise; a call that ends before the team
    // would start (sleeping workers: `nmkit bench linear`, OMP_WAIT_POLICY=passive) runs on one
    // thread. Quiet, 2 threads, sleeping workers, dense f32 at 4 tokens, 192x576: oneDNN on the team
    // 78 us, OpenBLAS 45 us, oneDNN on one thread 23 us.
    plan.onednn_threads = worth_splitting(onednn_one_thread_seconds(w, M, plan.matmul)) ? thread_count() : 1;
    return plan;
  }
  if (w.slide) {
    const bool int8 = w.dtype == DType::I8;
    const int64_t from = int8 ? kUnslidInt8Tokens : w.bf16_x ? kUnslidNmTokensBf16x : kUnslidNmTokensF32x;
    if (M >= from) {  // decompressed tile by tile under the dense kernel, X lifted
      plan.route = Route::Tiles;
      return plan;
    }
  }
  const bool bf16_pairs = w.bf16_x && plan.dtype == DType::BF16;
  switch (plan.kind) {
    case WeightFormat::Dense:
      plan.route = plan.dtype == DType::BF16 && M >= kTileTokens ? Route::Tiles : Route::Rows;
      break;
    case WeightFormat::Sparse24:
      if (plan.dtype == DType::I8) {
        plan.route = !w.slide && M >= int8_tiles_from(w, kernels.sparse24_i8_tile) ? Route::Tiles : Route::Rows;
      } else if (bf16_pairs && kernels.sparse24_bf16x != nullptr) {
        plan.route = Route::Bf16Pairs;  // vdpbf16ps: twice the products of an f32 FMA per instruction
      } else if (M >= kTokenLaneTokens && token_lanes_kernel(kernels, plan.dtype) != nullptr) {
        plan.route = Route::TokenLanes;
        plan.lanes_split_tokens = M >= kLanesSplitTokens && w.streamed_bytes <= kLanesSplitWeightBytes && thread_count() > 1;
      } else if (bf16_pairs && M >= kTileTokens) {
        plan.route = Route::Tiles;  // bf16 activations without vdpbf16ps (AVX2): as dense bf16 does
      } else {
        plan.route = Route::Rows;
      }
      break;
    case WeightFormat::NM: {
      if (plan.dtype == DType::I8) {
        plan.route = M >= int8_tiles_from(w, kernels.nm_i8_tile) ? Route::Tiles : Route::Rows;
        break;
      }
      const cpu::LinearFn slabs = bf16_pairs ? kernels.nm_bf16x_slabs
                                  : plan.dtype == DType::F32 ? kernels.nm_f32_slabs
                                                             : kernels.nm_bf16_slabs;
      if (slabs != nullptr) plan.route = M >= kSlabTokens ? Route::Slabs : Route::Rows;
      else plan.route = M >= kTileTokens ? Route::Tiles : Route::Rows;
      break;
    }
  }
  return plan;
}

cpu::LinearFn plan_kernel(const LinearPlan& plan, const PackedLinear& w) {
  const cpu::LinearKernels& k = cpu::kernels_for(w.tier).linear;
  const bool bf16_pairs = w.bf16_x && w.dtype == DType::BF16;
  switch (plan.route) {
    case Route::Rows: return cpu::linear_kernel_for(k, w.kind, w.dtype);
    case Route::TokenLanes: return token_lanes_kernel(k, w.dtype);
    case Route::Bf16Pairs: return k.sparse24_bf16x;
    case Route::Slabs:
      return bf16_pairs ? k.nm_bf16x_slabs : w.dtype == DType::F32 ? k.nm_f32_slabs : k.nm_bf16_slabs;
    case Route::Tiles: return w.dtype == DType::I8 ? k.dense_i8 : k.dense_f32;
    case Route::Onednn: return nullptr;
  }
  return nullptr;
}

std::string plan_name(const PackedLinear& w, const LinearPlan& plan) {
  std::string form;
  std::string how;
  if (w.slide && w.dtype != DType::I8) {  // an nm weight packed slid
    form = "nm" + w.pattern.str();
    how = " as slid";
  } else {
    switch (w.kind) {
      case WeightFormat::Dense: form = "dense"; break;
      case WeightFormat::Sparse24: form = w.slide ? "slid" + w.slide->pattern.str() : "sparse24"; break;
      case WeightFormat::NM: form = "nm" + w.pattern.str(); break;
    }
  }
  switch (plan.route) {
    case Route::Rows: case Route::Bf16Pairs: break;
    case Route::TokenLanes: how += " token lanes"; break;
    case Route::Slabs: how += " slabs"; break;
    case Route::Tiles: how += " tiles"; break;
    case Route::Onednn:
      if (w.kind != WeightFormat::Dense) how += " panels";
      how += plan.onednn_threads == 1 && thread_count() > 1 ? " onednn 1 thread" : " onednn";
      break;
  }
  const char* type = w.dtype == DType::F32 ? " f32" : w.dtype == DType::BF16 ? " bf16" : " int8";
  return std::string(tier_name(w.tier)) + " " + form + type + how + (w.bf16_x ? " (bf16 x)" : "");
}

size_t plan_bytes(const PackedLinear& w, const LinearPlan&) {
  // Every route reads the packed weight once per call (per token block): panels and tiles are
  // decompressed from it into scratch.
  return w.streamed_bytes;
}

// One-thread rates measured on this project's machine (`NMKIT_THREADS=1 nmkit bench linear --rows 576
// --k 576 --m 1,16,64 --own-kernels --no-baselines`, quiet): 26 GB/s streamed at one token (1.3 MB of
// f32 weights), nmkit's f32 kernels 28-41 G products/s at 16-64 tokens, int8 74-87 G.
double one_thread_seconds(const PackedLinear& w, int64_t tokens) {
  constexpr double kBytesPerSecond = 26e9;
  const double products_per_second = w.dtype == DType::I8 ? 75e9 : 30e9;
  const double products = static_cast<double>(tokens) * static_cast<double>(w.rows) * static_cast<double>(w.K);
  return std::max(static_cast<double>(w.streamed_bytes) / kBytesPerSecond, products / products_per_second);
}

// oneDNN's GEMM on one thread, dense products per second, measured with a bare oneDNN matmul
// (OMP_NUM_THREADS=1, SmolLM2 shapes 192-1536 x 576-1536 at 16-512 tokens, 2026-11-24, an Intel
// Xeon with AMX): f32 64-91 G, bf16 451-829 G and int8 1110-1560 G (both on AMX tiles). The AMD
// Zen 5 VMs (no AMX) issue one ZMM FMA a cycle, not two: their one-thread oneDNN f32 calls ran
// 40-49 G (`nmkit bench linear --shapes smollm2`, 2026-11-25, rows "onednn 1 thread": 576x576 at 16
// tokens 0.133 ms, 192x576 at 64 0.144 ms), and with the Xeon's 85 G a 192x576 call of 64 tokens
// looked short enough for one thread, which took 0.144 ms against 0.111 for oneDNN on both
// (0.77x of the best dense kernel). So the f32 rate is the Xeon's where AMX says it is that class
// of core and this machine's elsewhere. Without AMX oneDNN runs bf16 with vdpbf16ps and int8 with
// vpdpbusd, 2x and 4x the products of an f32 FMA per instruction: those two rates are that ratio
// applied to the f32 rate (int8 4 x 45 G matches the 200 G a thread of oneDNN's 2-thread int8 GEMM
// runs here). nmkit's own kernels' rates (one_thread_seconds) made every oneDNN call look 3-20x
// longer than it is, so sleeping workers were woken (about 70 us with oneDNN's team) for GEMMs of
// 30-70 us.
double onednn_one_thread_seconds(const PackedLinear& w, int64_t tokens, MatmulType type) {
  constexpr double kBytesPerSecond = 26e9;
  const bool amx = cpu_features().amx_tile;
  const double f32_rate = amx ? 85e9 : 45e9;
  const double products_per_second = type == MatmulType::F32    ? f32_rate
                                     : type == MatmulType::Bf16 ? (amx && cpu_features().amx_bf16 ? 500e9 : 2 * f32_rate)
                                                                : (amx && cpu_features().amx_int8 ? 1100e9 : 4 * f32_rate);
  const double products = static_cast<double>(tokens) * static_cast<double>(w.rows) * static_cast<double>(w.K);
  return std::max(static_cast<double>(w.streamed_bytes) / kBytesPerSecond, products / products_per_second);
}

int64_t memory_bound_tokens() { return kMemoryBoundTokens; }

}  // namespace nmkit::linear
