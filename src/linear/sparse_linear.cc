// SparseLinear: validation at the boundary, packing once, and per call the plan's form and kernel
// (src/linear/linear_plan.h): the activation copy, token blocking and row-parallel dispatch to the
// tier's kernel, or oneDNN's matmul on the dense prepacked copy.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cpu/kernel_table.h"
#include "cpu/linear_common.h"
#include "linear/linear_driver.h"
#include "linear/linear_pack.h"
#include "linear/linear_plan.h"
#include "linear/linear_slid_forms.h"
#include "linear/sparse_linear_access.h"
#include "linear/onednn_matmul.h"
#include "nmkit/linear.h"
#include "nmkit/quant.h"
#include "nmkit/threads.h"
#include "core/thread_costs.h"

namespace nmkit {

using cpu::PackedLinear;
using linear::LinearLayer;
using linear::LinearPlan;
using linear::Route;

namespace {

Result<IsaTier> choose_tier(const LinearOptions& options) {
  if (!options.tier) return active_tier();
  if (*options.tier > detected_tier()) {
    return Error("linear: ISA tier " + std::string(tier_name(*options.tier)) + " is not supported by this machine (best: " +
                 std::string(tier_name(detected_tier())) + ")");
  }
  return *options.tier;
}

Result<SparseLinear> finish(Result<std::unique_ptr<PackedLinear>> packed, const LinearOptions& options);

// Tokens per block when M is large: the block's activations (f32) stay within about 1 MiB of L2 while
// every row block of the weight is applied to them.
int64_t token_block(int64_t K_x) { return std::max<int64_t>(16, (int64_t{1} << 20) / (K_x * 4)); }

// Tokens per block on token lanes: every block streams the whole weight once, so a block of a few
// tokens on long rows (23 at K = 11008 by token_block) streamed it 22 times for 512 tokens and left
// its second 16-token slab mostly padding (4096x11008 2:4 f32: 1.00x of oneDNN at 64 and 256 tokens
// against 1.4-1.6x on 4096-wide rows, quiet). X^T of a 128-token block (2 MiB at K = 4096) streams
// from L3 at every row block, which ran no slower than 64-token blocks there (4096x4096 at 256
// tokens 1.47-1.50x of oneDNN against 1.43-1.45x), so the block is whole pairs of slabs and at least
// 128 tokens.
int64_t token_lane_block(int64_t K_x) {
  const int64_t pair = 2 * cpu::kTokenLanes;
  return std::max<int64_t>(128, token_block(K_x) / pair * pair);
}

}  // namespace

// A SparseLinear's state is the plan's view of the layer (linear_plan.h), nothing more.
struct SparseLinear::Impl : LinearLayer {};

SparseLinear SparseLinearAccess::make(std::unique_ptr<PackedLinear> packed, const LinearOptions& options) {
  auto layer = std::make_unique<SparseLinear::Impl>();
  layer->packed = std::move(packed);
  layer->onednn = options.onednn;
  return SparseLinear(std::move(layer));
}

Result<SparseLinear> SparseLinearAccess::finish(Result<std::unique_ptr<PackedLinear>> packed, const LinearOptions& options) {
  return nmkit::finish(std::move(packed), options);
}

const PackedLinear& SparseLinearAccess::packed(const SparseLinear& layer) { return *layer.impl_->packed; }

namespace {

Result<SparseLinear> finish(Result<std::unique_ptr<PackedLinear>> packed, const LinearOptions& options) {
  if (!packed.ok()) return packed.error();
  auto tier = choose_tier(options);
  if (!tier.ok()) return tier.error();
  (*packed)->tier = *tier;
  if (options.bf16_activations) {
    if ((*packed)->dtype == DType::I8) return Error("linear: bf16 activations do not apply to int8 weights");
    (*packed)->bf16_x = true;
  }
  if (cpu::linear_kernel_for(cpu::kernels_for(*tier).linear, (*packed)->kind, (*packed)->dtype) == nullptr) {
    return Error("linear: no kernel for this weight form on tier " + std::string(tier_name(*tier)));
  }
  return SparseLinearAccess::make(std::move(*packed), options);
}

}  // namespace

SparseLinear::SparseLinear(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SparseLinear::SparseLinear(SparseLinear&&) noexcept = default;
SparseLinear& SparseLinear::operator=(SparseLinear&&) noexcept = default;
SparseLinear::~SparseLinear() = default;

Result<SparseLinear> SparseLinear::dense(const TensorView& weight, const LinearOptions& options) {
  if (!options.int8) return finish(cpu::pack_dense({weight}), options);
  return dense({weight}, nullptr, options);
}

Result<SparseLinear> SparseLinear::dense(const std::vector<TensorView>& parts, std::shared_ptr<const void> owner,
                                         const LinearOptions& options) {
  if (!options.int8) {
    const bool in_place = !parts.empty() && (parts[0].dtype == DType::F32 || parts[0].dtype == DType::BF16);
    return finish(in_place ? cpu::pack_dense_in_place(parts, std::move(owner)) : cpu::pack_dense(parts), options);
  }
  // INT8: each part quantized per row (so the codes of the stacked weight), then packed part by part.
  std::vector<Quantized> quantized;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].shape.size() != 2 || parts[i].cols() != parts[0].cols()) {
      return Error("dense weight part " + std::to_string(i) + ": shape " + shape_str(parts[i].shape) +
                   " does not stack with part 0 " + shape_str(parts[0].shape));
    }
    auto q = quantize_weights(parts[i], QuantType::Int8, parts.size() == 1 ? "dense weight" : "dense weight part " + std::to_string(i));
    if (!q.ok()) return q.error();
    quantized.push_back(std::move(*q));
  }
  return finish(cpu::pack_dense_int8(quantized), options);
}

Result<SparseLinear> SparseLinear::sparse24(const Sparse24& weight, const LinearOptions& options) {
  if (!options.int8) return finish(cpu::pack_sparse24(weight), options);
  NMKIT_TRY(validate(weight, "sparse24 weight"));
  auto q = quantize_weights(weight, QuantType::Int8, "sparse24 weight");
  if (!q.ok()) return q.error();
  return finish(cpu::pack_sparse24_int8(*q), options);
}

Result<SparseLinear> SparseLinear::nm(const NMPacked& weight, const LinearOptions& options) {
  if (options.int8) {
    NMKIT_TRY(validate(weight, "nm weight"));
    // The values hold every non-zero of a row, so their per-row codes are the dense weight's.
    auto q = quantize_weights(weight.values.view(), QuantType::Int8, "nm weight");
    if (!q.ok()) return q.error();
    return finish(cpu::pack_nm_int8(weight, *q), options);
  }
  auto tier = choose_tier(options);
  if (!tier.ok()) return tier.error();
  if (cpu::nm_runs_slid(weight.pattern, *tier, weight.dtype(), options.bf16_activations)) {
    return finish(cpu::pack_nm_as_slid(weight), options);
  }
  return finish(cpu::pack_nm(weight), options);
}

Result<SparseLinear> SparseLinear::nm_int8_by_rows(int64_t rows, int64_t K, Pattern pattern, DType values,
                                                   const std::function<Status(int64_t, NMPacked&)>& fill,
                                                   const LinearOptions& options) {
  LinearOptions int8 = options;
  int8.int8 = true;
  return finish(cpu::pack_nm_int8_by_rows(rows, K, pattern, values, fill), int8);
}

Result<SparseLinear> SparseLinear::sparse24_int8_by_rows(int64_t rows, int64_t K, DType values,
                                                         const std::function<Status(int64_t, Sparse24&)>& fill,
                                                         const LinearOptions& options) {
  LinearOptions int8 = options;
  int8.int8 = true;
  return finish(cpu::pack_sparse24_int8_by_rows(rows, K, values, fill), int8);
}

Result<SparseLinear> SparseLinear::slid(const TensorView& slid_weight, const SlideGeometry& geometry,
                                        const LinearOptions& options) {
  if (slid_weight.shape.size() != 2 || slid_weight.cols() != geometry.K_prime()) {
    return Error("slid weight: shape " + shape_str(slid_weight.shape) + " does not match [rows, K_prime = " +
                 std::to_string(geometry.K_prime()) + "] of the slide geometry");
  }
  auto packed24 = compress_sparse24(slid_weight, "slid weight");
  if (!packed24.ok()) return packed24.error();
  auto q = quantize_weights(*packed24, QuantType::Int8, "slid weight");
  if (!q.ok()) return q.error();
  auto packed = cpu::pack_sparse24_int8(*q);
  if (!packed.ok()) return packed.error();
  (*packed)->slide = geometry;
  (*packed)->K = geometry.K;  // the caller's X is the unlifted [M, K]
  LinearOptions int8 = options;
  int8.int8 = true;
  return finish(std::move(packed), int8);
}

Status SparseLinear::set_bias(const TensorView& bias) {
  if (bias.numel() != impl_->packed->rows || bias.shape.size() != 1) {
    return Error("linear: bias shape " + shape_str(bias.shape) + " does not match rows " + std::to_string(impl_->packed->rows));
  }
  if (!is_prunable(bias.dtype)) return Error("linear: bias dtype " + std::string(dtype_name(bias.dtype)) + " is not f32/bf16/f16");
  impl_->packed->bias = cpu::AlignedBytes::zeros(static_cast<size_t>(impl_->packed->rows) * 4);
  convert_to_f32(bias.dtype, bias.data, impl_->packed->bias.as<float>(), static_cast<size_t>(impl_->packed->rows));
  impl_->packed->has_bias = true;
  return ok_status();
}

namespace {

// Runs the kernel over all row blocks, split across the pool's threads when that pays.
void run_rows(cpu::LinearFn kernel, const cpu::LinearCall& call, int64_t row_blocks) {
  parallel_for(row_blocks, grain_for(row_blocks, 1, linear::one_thread_seconds(*call.w, call.M)), [&](int64_t begin, int64_t end) {
    cpu::LinearCall part = call;
    part.block_begin = begin;
    part.block_end = end;
    kernel(part);
  });
}

// Row block by row block: each decompressed into this thread's tile, then the dense kernel on it.
void run_tiles(const cpu::LinearKernels& kernels, const cpu::LinearCall& call) {
  const PackedLinear& w = *call.w;
  const bool int8 = w.dtype == DType::I8;
  const cpu::LinearFn dense = int8 ? kernels.dense_i8 : kernels.dense_f32;
  const int64_t width = w.K_x;
  const size_t bytes = static_cast<size_t>(cpu::kLinearRowBlock * width) * (int8 ? 1 : 4);
  parallel_for(w.row_blocks, grain_for(w.row_blocks, 1, linear::one_thread_seconds(w, call.M)), [&](int64_t begin, int64_t end) {
    thread_local cpu::AlignedBytes tile;
    if (tile.size < bytes) tile = cpu::AlignedBytes::zeros(bytes);
    for (int64_t b = begin; b < end; ++b) {
      cpu::decompress_block(w, b, int8 ? DType::I8 : DType::F32, tile.data.get(), width);
      cpu::LinearCall part = call;
      part.block_begin = b;
      part.block_end = b + 1;
      part.tile = tile.data.get();
      dense(part);
    }
  });
}

// The first row and column of X holding a NaN or infinity, as an Error (include/nmkit/linear.h), or
// ok: the search that runs once a tier's pass (cpu/activation_kernels.h) or the quantizer has found
// one somewhere in X.
// first_row: the row number of x's first row in the caller's X.
Status non_finite_error(const float* x, int64_t M, int64_t K, int64_t first_row = 0) {
  for (int64_t m = 0; m < M; ++m) {
    const float* row = x + m * K;
    const int64_t k = first_non_finite(row, K);
    if (k < 0) continue;
    char value[32];
    std::snprintf(value, sizeof value, "%g", static_cast<double>(row[k]));
    return Error(ErrorCode::InvalidValue, "linear: x row " + std::to_string(first_row + m) + ", column " +
                                              std::to_string(k) + ": value " + value + " is not finite");
  }
  return ok_status();
}

// X's rows [first_row, first_row + M) quantized per token to INT8 codes (row stride ld, lifted for a
// slid weight) for a kernel; a NaN or infinity in them, which the quantizer finds, is the linear's
// own error naming its row and column.
Status quantize_x(const float* x, int64_t M, int64_t K, const SlideGeometry* lift, int8_t* codes, int64_t ld,
                  float* scales, int64_t first_row) {
  const TensorView xv{DType::F32, {M, K}, reinterpret_cast<const std::byte*>(x)};
  Status quantized = quantize_tokens_into(xv, QuantType::Int8, lift, reinterpret_cast<std::byte*>(codes), ld, scales, "x");
  if (quantized.ok()) return quantized;
  Status located = non_finite_error(x, M, K, first_row);
  return located.ok() ? quantized : located;
}

// The input check of every call (docs/design.md section 8.4), on the caller's thread: on the pool
// the scan cost more than it saved (576x576 at 256 tokens, 147K values, 0.89 ms a call against 0.83
// serial) because the workers had to be woken for it.
Status check_finite(const cpu::ActivationKernels& passes, const float* x, int64_t M, int64_t K) {
  if (passes.all_finite(x, static_cast<size_t>(M * K))) return ok_status();
  return non_finite_error(x, M, K);
}

// One call on one packed form with the plan's route (not Onednn).
void apply_packed(const PackedLinear& w, const LinearPlan& plan, const float* x, int64_t M, float* y, Status& status) {
  const cpu::LinearFn kernel = linear::plan_kernel(plan, w);
  NMKIT_ASSERT(kernel != nullptr);
  const bool int8 = w.dtype == DType::I8;
  // X as the kernel reads it: lifted to K_prime for a slid weight, rows of ldx values, zero past them.
  const bool lift = w.slide.has_value();
  const int64_t ldx = w.K_x;
  // Token lanes split by tokens (the plan's lanes_split_tokens) take a block per thread at once.
  const int64_t block = plan.route != Route::TokenLanes ? token_block(int8 ? ldx / 4 : ldx)
                        : plan.lanes_split_tokens      ? token_lane_block(w.K_x) * thread_count()
                                                       : token_lane_block(w.K_x);
  // Activations padded with zeros to ldx (quantized, and lifted for a slid weight, for int8), one
  // token block at a time, in buffers reused across calls.
  thread_local std::vector<float> padded;
  thread_local std::vector<int8_t> codes;
  thread_local std::vector<float> scales;
  thread_local std::vector<uint16_t> x_bf16;
  thread_local cpu::AlignedBytes xt;
  const cpu::LinearKernels& table = cpu::kernels_for(w.tier).linear;
  const cpu::ActivationKernels& passes = cpu::kernels_for(w.tier).activation;
  const bool bf16_pairs = w.bf16_x && w.dtype == DType::BF16;
  const bool wants_bf16 = plan.route == Route::Bf16Pairs || (bf16_pairs && plan.route == Route::Slabs);
  const int64_t first = std::min(block, M);
  // Token lanes transpose the caller's X straight into X^T (zero past K) when nothing (a lift, bf16
  // rounding) has to change it first: the padded copy was a second pass over X.
  const bool direct_lanes = plan.route == Route::TokenLanes && !lift && !w.bf16_x;
  // The bf16-activation kernels read only X's bf16 bits (call.x_bf16): without a lift those come
  // straight from X, with no rounded f32 copy written and read in between.
  const bool bits_only = wants_bf16 && !lift;
  // X is checked for NaN and infinity (docs/design.md 8.4) by the pass that converts it for the kernel
  // where there is one (the quantizer, the bf16 bits) and the call is a single token block, so that
  // an error still comes before any row of Y is written; otherwise by a scan first. The scan runs on
  // the caller while the workers wait: 2.5% of a SmolLM2 2:4 int8 prefill (perf), a pass the oneDNN
  // route never paid.
  const bool pass_checks = (int8 || bits_only) && M <= block;
  if (!pass_checks) {
    status = check_finite(passes, x, M, w.K);
    if (!status.ok()) return;
  }
  if (int8) {
    codes.resize(static_cast<size_t>(first * ldx));
    scales.resize(static_cast<size_t>(first));
  } else if (!direct_lanes && !bits_only) {
    padded.resize(static_cast<size_t>(first * ldx));
  }
  const int64_t cols = lift ? w.slide->K_prime() : w.K;  // columns the activation producer writes
  for (int64_t m0 = 0; m0 < M; m0 += block) {
    const int64_t count = std::min(block, M - m0);
    cpu::LinearCall call;
    call.w = &w;
    call.M = count;
    call.y = y + m0 * w.rows;
    call.ldy = w.rows;
    if (int8) {
      status = quantize_x(x + m0 * w.K, count, w.K, lift ? &*w.slide : nullptr, codes.data(), ldx, scales.data(), m0);
      if (!status.ok()) return;
      for (int64_t m = 0; m < count; ++m) std::memset(codes.data() + m * ldx + cols, 0, static_cast<size_t>(ldx - cols));
      call.x = codes.data();
      call.x_scale = scales.data();
    } else if (!direct_lanes) {
      if (wants_bf16) x_bf16.resize(static_cast<size_t>(count * ldx));
      // Token by token across the pool when that pays (serial, the copy and bf16 conversion of a
      // 576x576 layer's 256 tokens were 11% of a row-lane call, perf, with the other thread
      // waiting); the buffers are this thread's (thread_local), so the workers get their addresses.
      float* const padded_x = bits_only ? nullptr : padded.data();
      uint16_t* const bits = wants_bf16 ? x_bf16.data() : nullptr;
      const double bytes_per_value = bits_only ? 6.0 : w.bf16_x ? 14.0 : 8.0;
      const double seconds = static_cast<double>(count * ldx) * bytes_per_value / kOneCoreCopyBytesPerSecond;
      std::atomic<bool> finite{true};
      parallel_for(count, grain_for(count, 1, seconds), [&](int64_t begin, int64_t end) {
        for (int64_t m = begin; m < end; ++m) {
          if (bits_only) {
            uint16_t* row = bits + m * ldx;
            if (!passes.to_bf16(x + (m0 + m) * w.K, static_cast<size_t>(w.K), nullptr, row)) {
              finite.store(false, std::memory_order_relaxed);
            }
            std::memset(row + w.K, 0, static_cast<size_t>(ldx - w.K) * 2);
            continue;
          }
          float* dst = padded_x + m * ldx;
          if (lift) {
            cpu::lift_token(w, x + (m0 + m) * w.K, dst);
          } else {
            std::memcpy(dst, x + (m0 + m) * w.K, static_cast<size_t>(w.K) * 4);
            std::memset(dst + w.K, 0, static_cast<size_t>(ldx - w.K) * 4);
          }
          if (w.bf16_x) passes.to_bf16(dst, static_cast<size_t>(ldx), dst, bits != nullptr ? bits + m * ldx : nullptr);
        }
      });
      if (!finite.load(std::memory_order_relaxed)) {
        status = non_finite_error(x + m0 * w.K, count, w.K, m0);
        return;
      }
      call.x = padded_x;
      if (wants_bf16) call.x_bf16 = bits;
    }
    switch (plan.route) {
      case Route::TokenLanes: {
        const int64_t slabs = (count + cpu::kTokenLanes - 1) / cpu::kTokenLanes;
        const size_t bytes = static_cast<size_t>(slabs * w.K_x * cpu::kTokenLanes) * 4;
        if (xt.size < bytes) xt = cpu::AlignedBytes::zeros(bytes);
        // The buffers are this thread's (thread_local): the workers get their addresses.
        const float* source = direct_lanes ? x + m0 * w.K : padded.data();
        const int64_t ld = direct_lanes ? w.K : w.K_x;  // row stride, and the columns a row holds
        float* lanes = xt.as<float>();
        auto transpose = [&](int64_t m_begin, int64_t tokens) {
          passes.to_token_lanes(source + m_begin * ld, ld, tokens, ld, w.K_x, lanes + m_begin * w.K_x);
        };
        if (plan.lanes_split_tokens) {
          // Each thread transposes its own slab pairs and runs every row over them: one parallel
          // region, and no X^T line written by one core and read by the other (linear_plan.cc
          // kLanesSplitTokens has the measurements).
          const int64_t pairs = (slabs + 1) / 2, pair_tokens = 2 * cpu::kTokenLanes;
          const double seconds = linear::one_thread_seconds(w, count) + 2.0 * static_cast<double>(bytes) / kOneCoreCopyBytesPerSecond;
          parallel_for(pairs, grain_for(pairs, 1, seconds), [&](int64_t begin, int64_t end) {
            const int64_t m_begin = begin * pair_tokens;
            const int64_t tokens = std::min(count, end * pair_tokens) - m_begin;
            transpose(m_begin, tokens);
            cpu::LinearCall part = call;
            part.M = tokens;
            part.y = call.y + m_begin * call.ldy;
            part.xt = lanes + m_begin * w.K_x;
            part.block_begin = 0;
            part.block_end = w.row_blocks;
            kernel(part);
          });
          break;
        }
        // Slab by slab across the pool when that pays (a serial pass over all of X^T left the other
        // thread waiting).
        const double seconds = 2.0 * static_cast<double>(bytes) / kOneCoreCopyBytesPerSecond;  // read + write
        parallel_for(slabs, grain_for(slabs, 1, seconds), [&](int64_t begin, int64_t end) {
          const int64_t m_begin = begin * cpu::kTokenLanes;
          transpose(m_begin, std::min(count, end * cpu::kTokenLanes) - m_begin);
        });
        call.xt = lanes;
        run_rows(kernel, call, w.row_blocks);
        break;
      }
      case Route::Tiles: run_tiles(table, call); break;
      default: run_rows(kernel, call, w.row_blocks); break;
    }
  }
}

// The oneDNN route's panels: rows [row0, row0 + rows) of the weight as dense rows in the GEMM's type,
// either where they lie (a dense weight in that type, data set) or decompressed into scratch per call
// (data null). A panel holds about kPanelBytes of rows, so that it is written and read back while in
// a core's L2 (or stays there as the GEMM's operand), and a call has at least one per thread.
struct Panel {
  int64_t row0 = 0, rows = 0;
  const std::byte* data = nullptr;
  int64_t ld = 0;
};
constexpr size_t kPanelBytes = size_t{1} << 20;
// Tokens per GEMM of a panel: bounds its output buffer (kPanelTokens x panel rows of f32).
constexpr int64_t kPanelTokens = 512;

size_t matmul_size(linear::MatmulType type) {
  return type == linear::MatmulType::F32 ? 4 : type == linear::MatmulType::Bf16 ? 2 : 1;
}

std::vector<Panel> panels_of(const PackedLinear& w, linear::MatmulType type, int threads) {
  const auto size = static_cast<int64_t>(matmul_size(type));
  const int64_t by_bytes = std::max<int64_t>(16, static_cast<int64_t>(kPanelBytes) / (w.K_x * size) / 16 * 16);
  const int64_t per_thread = ((w.rows + threads - 1) / threads + 15) / 16 * 16;
  const int64_t P = std::min(by_bytes, per_thread);
  std::vector<Panel> out;
  const bool in_place = w.kind == WeightFormat::Dense && static_cast<int64_t>(dtype_size(w.dtype)) == size;
  if (in_place) {  // within each part, so that a panel's rows are evenly spaced
    int64_t row0 = 0;
    for (const cpu::RowPart& part : w.parts) {
      for (int64_t r = 0; r < part.rows; r += P) {
        const int64_t n = std::min(P, part.rows - r);
        out.push_back({row0 + r, n, part.data + static_cast<size_t>(r * part.ld * size), part.ld});
      }
      row0 += part.rows;
    }
    return out;
  }
  for (int64_t r = 0; r < w.rows; r += P) out.push_back({r, std::min(P, w.rows - r), nullptr, 0});
  return out;
}

// Y[:, panel rows] from one GEMM per token block on the panel's rows, then the epilogue (as
// apply_onednn's), on the calling thread: the panel's rows decompressed into this thread's scratch
// first where they are not dense in the GEMM's type. input: X in the GEMM's type, rows K apart.
Status run_panel(const PackedLinear& w, const LinearPlan& plan, const Panel& panel, const void* input, int64_t K,
                 const float* x_scale, int64_t M, float* y) {
  const size_t size = matmul_size(plan.matmul);
  const int64_t width = w.K_x;
  thread_local cpu::AlignedBytes rows;
  thread_local cpu::AlignedBytes out;
  const std::byte* data = panel.data;
  int64_t ld = panel.ld;
  if (data == nullptr) {
    const size_t bytes = static_cast<size_t>((panel.rows + cpu::kLinearRowBlock) * width) * size;
    if (rows.size < bytes) rows = cpu::AlignedBytes::zeros(bytes);
    const DType out_type = plan.matmul == linear::MatmulType::F32    ? DType::F32
                           : plan.matmul == linear::MatmulType::Bf16 ? DType::BF16
                                                                     : DType::I8;
    const int64_t b0 = panel.row0 / cpu::kLinearRowBlock;
    const int64_t b1 = (panel.row0 + panel.rows + cpu::kLinearRowBlock - 1) / cpu::kLinearRowBlock;
    for (int64_t b = b0; b < b1; ++b) {
      cpu::decompress_block(w, b, out_type, rows.data.get() + static_cast<size_t>((b - b0) * cpu::kLinearRowBlock * width) * size,
                            width);
    }
    data = rows.data.get();
    ld = width;
  }
  const int64_t tokens = std::min(M, kPanelTokens);
  if (out.size < static_cast<size_t>(tokens * panel.rows) * 4) out = cpu::AlignedBytes::zeros(static_cast<size_t>(tokens * panel.rows) * 4);
  const float* bias = w.has_bias ? w.bias.as<float>() + panel.row0 : nullptr;
  const float* w_scale = plan.matmul == linear::MatmulType::Int8 ? w.row_scale.as<float>() + panel.row0 : nullptr;
  const auto* x = static_cast<const std::byte*>(input);
  for (int64_t m0 = 0; m0 < M; m0 += tokens) {
    const int64_t count = std::min(tokens, M - m0);
    NMKIT_TRY(linear::onednn_gemm(plan.matmul, x + static_cast<size_t>(m0 * K) * size, count, K, data, panel.rows, K, ld,
                                  out.data.get(), 1));
    for (int64_t m = 0; m < count; ++m) {
      float* dst = y + (m0 + m) * w.rows + panel.row0;
      if (w_scale != nullptr) {
        const int32_t* acc = out.as<int32_t>() + m * panel.rows;
        const float xs = x_scale[m0 + m];
        for (int64_t r = 0; r < panel.rows; ++r) {
          float value = (xs * w_scale[r]) * static_cast<float>(acc[r]);
          if (bias != nullptr) value += bias[r];
          dst[r] = value;
        }
      } else {
        const float* sums = out.as<float>() + m * panel.rows;
        for (int64_t r = 0; r < panel.rows; ++r) dst[r] = bias != nullptr ? sums[r] + bias[r] : sums[r];
      }
    }
  }
  return ok_status();
}

// The epilogue of a whole-weight GEMM, in place on Y: the INT8 scales (Y holds int32 sums) and the bias.
void epilogue(const PackedLinear& w, linear::MatmulType type, const float* x_scale, int64_t M, float* y) {
  const int64_t rows = w.rows;
  const float* bias = w.has_bias ? w.bias.as<float>() : nullptr;
  // The epilogue reads and writes Y once: M * rows floats each way.
  const double seconds = static_cast<double>(M * rows) * 8.0 / kOneCoreCopyBytesPerSecond;
  if (type == linear::MatmulType::Int8) {
    const float* w_scale = w.row_scale.as<float>();
    parallel_for(M, grain_for(M, 1, seconds), [&](int64_t begin, int64_t end) {
      for (int64_t m = begin; m < end; ++m) {
        float* out = y + m * rows;
        for (int64_t r = 0; r < rows; ++r) {
          int32_t acc;
          std::memcpy(&acc, out + r, 4);
          float value = (x_scale[m] * w_scale[r]) * static_cast<float>(acc);
          if (bias != nullptr) value += bias[r];
          out[r] = value;
        }
      }
    });
  } else if (bias != nullptr) {
    parallel_for(M, grain_for(M, 1, seconds), [&](int64_t begin, int64_t end) {
      for (int64_t m = begin; m < end; ++m) {
        for (int64_t r = 0; r < rows; ++r) y[m * rows + r] += bias[r];
      }
    });
  }
}

// Whether a call runs one GEMM on the whole weight (oneDNN's threads) instead of panels: a dense
// weight of one part already in the GEMM's type.
bool whole_gemm(const PackedLinear& w, const std::vector<Panel>& panels) {
  return w.kind == WeightFormat::Dense && w.parts.size() == 1 && !panels.empty() && panels[0].data != nullptr;
}

// One call through oneDNN: activations in the matmul's type (f32 as given, rounded to bf16, or
// quantized per token), the GEMM, then the epilogue: bias, and for int8 the scales, as the kernels
// apply them (cpu/linear_common.h int8_output, store_output), so Y is bit for bit theirs for int8.
// x_bits: X already in bf16 (checked finite by the caller) for a bf16 GEMM, used as it is; else null.
Status apply_onednn(const PackedLinear& w, const LinearPlan& plan, const float* x, const uint16_t* x_bits, int64_t M,
                    float* y) {
  // A slid weight's rows (K_prime wide, zero to K_x) meet X lifted to them: the GEMM's inner
  // dimension is K_x then, and X's row stride.
  const int64_t K = w.slide ? w.K_x : w.K, rows = w.rows;
  const size_t n = static_cast<size_t>(M * K);
  thread_local std::vector<float> rounded;
  thread_local std::vector<uint16_t> bits;
  thread_local std::vector<int8_t> codes;
  thread_local std::vector<float> scales;
  thread_local std::vector<float> lifted;
  const cpu::ActivationKernels& passes = cpu::kernels_for(w.tier).activation;
  if (w.slide && plan.matmul != linear::MatmulType::Int8) {  // (INT8 lifts while quantizing)
    NMKIT_ASSERT(x_bits == nullptr);
    NMKIT_TRY(check_finite(passes, x, M, w.K));
    lifted.resize(n);
    for (int64_t m = 0; m < M; ++m) cpu::lift_token(w, x + m * w.K, lifted.data() + m * K);
    x = lifted.data();
  }
  // X is checked for NaN and infinity by the pass that converts it for the GEMM, where there is one
  // (the quantizer, the bf16 conversion): one read of X instead of two.
  const void* input = x;
  if (x_bits != nullptr) {
    NMKIT_ASSERT(plan.matmul == linear::MatmulType::Bf16);
    input = x_bits;
  } else if (plan.matmul == linear::MatmulType::Int8) {
    codes.resize(n);
    scales.resize(static_cast<size_t>(M));
    NMKIT_TRY(quantize_x(x, M, w.K, w.slide ? &*w.slide : nullptr, codes.data(), K, scales.data(), 0));
    if (w.slide) {
      const int64_t cols = w.slide->K_prime();
      for (int64_t m = 0; m < M; ++m) std::memset(codes.data() + m * K + cols, 0, static_cast<size_t>(K - cols));
    }
    input = codes.data();
  } else if (plan.matmul == linear::MatmulType::Bf16 || w.bf16_x) {
    // X's bf16 bits straight from X (one read and a half-size write; with a rounded f32 copy in between
    // this cost as much as the GEMM at 192x576, 512 tokens), or for f32 weights with bf16 activations
    // X rounded to bf16 for the f32 GEMM; split across the pool when worth it.
    const bool bits_out = plan.matmul == linear::MatmulType::Bf16;
    if (bits_out) bits.resize(n);
    else rounded.resize(n);
    uint16_t* const out_bits = bits_out ? bits.data() : nullptr;  // thread_local: the pool gets pointers
    float* const out_rounded = bits_out ? nullptr : rounded.data();
    const double seconds = static_cast<double>(n) * (bits_out ? 6.0 : 8.0) / kOneCoreCopyBytesPerSecond;
    std::atomic<bool> finite{true};
    parallel_for(M, grain_for(M, 1, seconds), [&](int64_t begin, int64_t end) {
      const size_t offset = static_cast<size_t>(begin * K), count = static_cast<size_t>((end - begin) * K);
      if (!passes.to_bf16(x + offset, count, out_rounded ? out_rounded + offset : nullptr,
                          out_bits ? out_bits + offset : nullptr)) {
        finite.store(false, std::memory_order_relaxed);
      }
    });
    if (!finite.load(std::memory_order_relaxed)) return non_finite_error(x, M, K);
    input = bits_out ? static_cast<const void*>(out_bits) : out_rounded;
  } else if (!w.slide) {  // (a lifted X was checked before lifting)
    NMKIT_TRY(check_finite(passes, x, M, K));
  }
  const std::vector<Panel> panels = panels_of(w, plan.matmul, plan.onednn_threads);
  if (whole_gemm(w, panels)) {
    // A dense weight of one part: one GEMM on all its rows over oneDNN's threads, then the epilogue.
    NMKIT_TRY(linear::onednn_gemm(plan.matmul, input, M, K, w.parts[0].data, rows, K, w.parts[0].ld, y, plan.onednn_threads));
    epilogue(w, plan.matmul, scales.data(), M, y);
    return ok_status();
  }
  // Panel by panel across the pool (each thread's GEMMs on one thread: no nested team). The scales
  // are this thread's (thread_local): the workers get their address.
  const float* const x_scale = scales.data();
  std::mutex failed_mutex;
  Status failed = ok_status();
  const auto count = static_cast<int64_t>(panels.size());
  parallel_for(count, plan.onednn_threads > 1 ? 1 : count, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Status done = run_panel(w, plan, panels[static_cast<size_t>(i)], input, K, x_scale, M, y);
      if (!done.ok()) {
        std::lock_guard<std::mutex> lock(failed_mutex);
        if (failed.ok()) failed = done;
        return;
      }
    }
  });
  return failed;
}

}  // namespace

Status SparseLinear::apply(const float* x, int64_t M, float* y) const {
  if (M < 0) return Error("linear: M = " + std::to_string(M) + " is negative");
  if (M == 0) return ok_status();
  const PackedLinear& w = *impl_->packed;
  const LinearPlan plan = linear::plan_for(*impl_, M);
  // Both routes check X for NaN and infinity themselves, in their conversion pass where they can.
  if (plan.route == Route::Onednn) return apply_onednn(w, plan, x, nullptr, M, y);
  Status status = ok_status();
  apply_packed(w, plan, x, M, y, status);
  return status;
}

Status SparseLinear::apply(const TensorView& x, float* y) const {
  const PackedLinear& w = *impl_->packed;
  if (x.shape.size() != 2 || x.cols() != w.K) {
    return Error(ErrorCode::InvalidArgument, "linear: input shape " + shape_str(x.shape) + " does not match K = " +
                                                 std::to_string(w.K));
  }
  if (!is_prunable(x.dtype)) return Error("linear: input dtype " + std::string(dtype_name(x.dtype)) + " is not f32/bf16/f16");
  const int64_t M = x.rows();
  if (x.dtype == DType::F32 || M == 0) return apply(x.as<float>(), M, y);
  const size_t n = static_cast<size_t>(M * w.K);
  if (x.dtype == DType::BF16) {
    // bf16 X for a bf16 GEMM goes to it as it is: widening it and rounding it back (what the f32
    // entry point does) gives the same bits, at the cost of two passes over X.
    const LinearPlan plan = linear::plan_for(*impl_, M);
    if (plan.route == Route::Onednn && plan.matmul == linear::MatmulType::Bf16 && !w.slide) {
      const auto* bits = reinterpret_cast<const uint16_t*>(x.data);
      if (!cpu::kernels_for(w.tier).activation.all_finite_bf16(bits, n)) {
        std::vector<float> row(static_cast<size_t>(w.K));
        for (int64_t m = 0; m < M; ++m) {  // the f32 entry point's error for the first bad row
          convert_to_f32(DType::BF16, bits + m * w.K, row.data(), row.size());
          NMKIT_TRY(non_finite_error(row.data(), 1, w.K, m));
        }
      }
      return apply_onednn(w, plan, nullptr, bits, M, y);
    }
  }
  thread_local std::vector<float> widened;
  widened.resize(n);
  convert_to_f32(x.dtype, x.data, widened.data(), n);
  return apply(widened.data(), M, y);
}

Result<Tensor> SparseLinear::apply(const TensorView& x) const {
  if (x.shape.size() != 2) {
    return Error("linear: input shape " + shape_str(x.shape) + " does not match K = " + std::to_string(impl_->packed->K));
  }
  Tensor y = Tensor::empty(DType::F32, {x.rows(), impl_->packed->rows});
  NMKIT_TRY(apply(x, y.as<float>()));
  return y;
}

int64_t SparseLinear::rows() const { return impl_->packed->rows; }
int64_t SparseLinear::K() const { return impl_->packed->K; }
DType SparseLinear::weight_dtype() const { return impl_->packed->dtype; }
IsaTier SparseLinear::tier() const { return impl_->packed->tier; }

namespace {

// An nm weight that SparseLinear::nm packed slid (f32/bf16 sparse24 over K_prime).
bool nm_packed_slid(const PackedLinear& w) { return w.slide && w.dtype != DType::I8; }

}  // namespace

WeightFormat SparseLinear::weight_format() const {
  if (nm_packed_slid(*impl_->packed)) return WeightFormat::NM;
  switch (impl_->packed->kind) {
    case WeightFormat::Dense: return WeightFormat::Dense;
    case WeightFormat::Sparse24: return WeightFormat::Sparse24;
    case WeightFormat::NM: return WeightFormat::NM;
  }
  return WeightFormat::Dense;
}

Pattern SparseLinear::pattern() const {
  if (impl_->packed->kind == WeightFormat::NM || nm_packed_slid(*impl_->packed)) return impl_->packed->pattern;
  return Pattern{2, 4};
}

std::string SparseLinear::kernel_name() const { return kernel_name(1); }

std::string SparseLinear::kernel_name(int64_t M) const {
  return linear::plan_name(*impl_->packed, linear::plan_for(*impl_, std::max<int64_t>(M, 1)));
}

size_t SparseLinear::bytes_streamed() const { return bytes_streamed(1); }

size_t SparseLinear::bytes_streamed(int64_t M) const {
  return linear::plan_bytes(*impl_->packed, linear::plan_for(*impl_, std::max<int64_t>(M, 1)));
}

double SparseLinear::byte_ratio() const { return byte_ratio(1); }

double SparseLinear::byte_ratio(int64_t M) const {
  const PackedLinear& w = *impl_->packed;
  double dense = static_cast<double>(w.rows) * static_cast<double>(w.K) * static_cast<double>(dtype_size(w.dtype));
  if (w.dtype == DType::I8) dense += static_cast<double>(w.rows) * 4.0;  // per-row scales
  return dense / static_cast<double>(bytes_streamed(M));
}

double SparseLinear::mac_ratio() const {
  const PackedLinear& w = *impl_->packed;
  if (w.slide) return w.slide->ideal_speedup();
  switch (w.kind) {
    case WeightFormat::Dense: return 1.0;
    case WeightFormat::Sparse24: return 2.0;
    case WeightFormat::NM: return static_cast<double>(w.pattern.group) / w.pattern.keep;
  }
  return 1.0;
}

size_t SparseLinear::borrowed_bytes() const {
  const PackedLinear& w = *impl_->packed;
  if (w.kind != WeightFormat::Dense || w.values.data != nullptr) return 0;
  size_t bytes = 0;
  for (const cpu::RowPart& part : w.parts) bytes += static_cast<size_t>(part.rows * part.ld) * dtype_size(w.dtype);
  return bytes;
}

size_t SparseLinear::resident_bytes() const {
  const PackedLinear& w = *impl_->packed;
  return w.values.size + w.meta.size + w.row_scale.size + w.row_sum.size + w.bias.size +
         w.lift_source.size() * sizeof(int32_t) + borrowed_bytes();
}

double SparseLinear::theoretical_speedup(int64_t M) const {
  return M <= linear::memory_bound_tokens() ? byte_ratio(M) : 1.0;
}

}  // namespace nmkit
