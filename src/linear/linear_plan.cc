// The plan: every token-count threshold of SparseLinear, each with the reason that holds it; the
// measurements that chose them are in docs/data.md ("The linear plan's thresholds").
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

// A slid INT8 weight runs the dense kernel on tiles decompressed from its K_prime-wide rows, against
// the lifted X, from this many tokens: past it the 2:4 kernel's per-token gather of the activations
// costs more than the products it saves.
constexpr int64_t kUnslidInt8Tokens = 8;

// An nm keep:2N weight packed slid (f32/bf16, SparseLinear::nm on AVX-512) runs decompressed tiles
// the same way from this many tokens, by activation type: the slid kernel leads for few tokens.
constexpr int64_t kUnslidNmTokensF32x = 64;
constexpr int64_t kUnslidNmTokensBf16x = 32;

// A sparse24 INT8 weight on a tier without INT8 tiles (AVX2, scalar; oneDNN runs INT8 only with
// VNNI) runs nmkit's dense INT8 kernel on decompressed codes (the same integer sums, bit for bit)
// from this many tokens on rows of at most kDenseInt8ShortK, and from kDenseInt8Tokens on longer
// ones: its own kernel expands each group of 4 codes once per token.
constexpr int64_t kDenseInt8ShortRowTokens = 4;
constexpr int64_t kDenseInt8Tokens = 16;
constexpr int64_t kDenseInt8ShortK = 1024;

// --- nmkit's own kernels -------------------------------------------------------------------------

// sparse24 f32/bf16 weights run on token lanes from this many tokens (equal to the row kernels at 8,
// faster from 16).
constexpr int64_t kTokenLaneTokens = 8;

// From this many tokens sparse24 f32 and bf16 weights (f32 activations) stay on token lanes even where
// oneDNN's GEMM would otherwise run (OnednnFrom below): each kept value is broadcast from a register,
// so token lanes lead oneDNN at every M from 16 on long rows.
constexpr int64_t kTokenLanesLeadTokens = 16;

// Token-lane calls of at least this many tokens (a 32-token slab pair per thread) on a weight of at
// most this many streamed bytes split their tokens between the threads, each running every row,
// instead of their rows: each core then reads only the X^T it wrote, which pays while the weight is
// small (no consistent gain past a few MiB).
constexpr int64_t kLanesSplitTokens = 64;
constexpr size_t kLanesSplitWeightBytes = size_t{4} << 20;

// The AVX-512 nm kernels expand each K slab once for all tokens from this many tokens; up to 4 the
// streaming kernel, which keeps 4 tokens' sums in registers, expands each mask once per call too.
constexpr int64_t kSlabTokens = 5;

// bf16 x bf16 nm weights stay on the streaming kernel (vpexpandw + vdpbf16ps, 4 tokens a pass) below
// this many tokens, the slab kernel and oneDNN's panels costing more up to it (docs/data.md).
constexpr int64_t kNmBf16xPairsTokens = 24;

// Row blocks are decompressed into dense tiles for the dense micro-kernel from this many tokens:
// bf16 dense (widened once instead of once per 4 tokens), INT8 sparse24 (vpermt2b per token costs
// as much as a second VNNI), nm on tiers without slabs, and sparse24 bf16 with bf16 activations on
// tiers without vdpbf16ps. Below it the scalar decompression is not repaid; on AVX-512 nm slabs beat
// tiles, so nm takes no tiles there.
constexpr int64_t kTileTokens = 64;

// --- oneDNN --------------------------------------------------------------------------------------

// From these token counts a call runs oneDNN's matmul (the compute-bound regime, where oneDNN's
// register-blocked brgemm beats nmkit's kernels): on a dense weight's own rows, or on panels of rows
// decompressed from a sparse one into per-thread scratch. Thresholds per weight as the user built it
// (an nm weight packed slid counts as nm, whichever of its forms a call reads), dtype and activation
// type. sparse24 f32 and bf16 with f32 activations stay on token lanes from kTokenLanesLeadTokens
// whatever these say (so their oneDNN range is only short rows' [8, 16) tokens). Dense and slid
// INT8 with long rows (kLongRowK) keep nmkit's kernels at 4 tokens.
struct OnednnFrom {
  int64_t dense_f32, dense_bf16, dense_bf16x, dense_int8, dense_int8_long_rows;
  int64_t sparse24_f32, sparse24_f32_short_rows, sparse24_bf16, sparse24_bf16x, sparse24_int8;
  int64_t nm_f32, nm_bf16, nm_bf16x, nm_int8;
  int64_t slid_int8, slid_int8_long_rows;
};
// A sparse weight's oneDNN call first decompresses its panels into scratch: a full pass that writes
// the dense weight, so the sparse thresholds sit where the GEMM's compute repays it (docs/data.md,
// "The plan's thresholds after one copy of each weight").
constexpr OnednnFrom kOnednnFrom{
    /*dense_f32=*/16, /*dense_bf16=*/8, /*dense_bf16x=*/12, /*dense_int8=*/4, /*dense_int8_long_rows=*/8,
    /*sparse24_f32=*/64, /*sparse24_f32_short_rows=*/8, /*sparse24_bf16=*/64, /*sparse24_bf16x=*/32,
    /*sparse24_int8=*/16,
    /*nm_f32=*/64, /*nm_bf16=*/64, /*nm_bf16x=*/kNmBf16xPairsTokens, /*nm_int8=*/16,
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
// exact in f32 either way.
bool runs_bf16_gemm(DType dtype, bool bf16_x) {
  return dtype == DType::BF16 && bf16_x && onednn_runs(MatmulType::Bf16);
}

// The table's threshold for w (AVX-512 measurements).
int64_t table_onednn_from(const PackedLinear& w) {
  const OnednnFrom& t = kOnednnFrom;
  const bool bf16x = w.bf16_x;
  // bf16 x bf16 on the f32 copy (runs_bf16_gemm) takes the thresholds of bf16 weights with f32
  // activations; sparse24 keeps its own.
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
      if (bf16_pairs && kernels.nm_bf16x != nullptr && M < kNmBf16xPairsTokens) plan.route = Route::Bf16Pairs;
      else if (slabs != nullptr) plan.route = M >= kSlabTokens ? Route::Slabs : Route::Rows;
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
    case Route::Bf16Pairs: return w.kind == WeightFormat::NM ? k.nm_bf16x : k.sparse24_bf16x;
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

// One-thread rates of nmkit's kernels on this project's machine: bytes streamed per second at one
// token, products per second once compute-bound (f32/bf16, int8).
double one_thread_seconds(const PackedLinear& w, int64_t tokens) {
  constexpr double kBytesPerSecond = 26e9;
  const double products_per_second = w.dtype == DType::I8 ? 75e9 : 30e9;
  const double products = static_cast<double>(tokens) * static_cast<double>(w.rows) * static_cast<double>(w.K);
  return std::max(static_cast<double>(w.streamed_bytes) / kBytesPerSecond, products / products_per_second);
}

// oneDNN's GEMM on one thread, dense products per second: the f32 rate of an AMX-class core where
// AMX says it is one and this machine's otherwise; without AMX, bf16 (vdpbf16ps) and int8 (vpdpbusd)
// at 2x and 4x the f32 rate, with AMX tiles their measured rates. These decide when waking the
// sleeping workers pays (about 70 us with oneDNN's team).
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
