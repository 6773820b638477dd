// SparseLinear: validation at the boundary, packing once, and per call the activation copy, token
// blocking and row-parallel dispatch to the tier's kernel.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/kernel_table.h"
#include "linear/linear_driver.h"
#include "linear/linear_pack.h"
#include "linear/linear_slid_forms.h"
#include "nmkit/linear.h"
#include "nmkit/quant.h"
#include "nmkit/threads.h"

namespace nmkit {

using cpu::PackedKind;
using cpu::PackedLinear;

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

}  // namespace

struct SparseLinearAccess {
  static SparseLinear make(std::unique_ptr<PackedLinear> packed) { return SparseLinear(std::move(packed)); }
};

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
  return SparseLinearAccess::make(std::move(*packed));
}

}  // namespace

SparseLinear::SparseLinear(std::unique_ptr<PackedLinear> packed) : packed_(std::move(packed)) {}
SparseLinear::SparseLinear(SparseLinear&&) noexcept = default;
SparseLinear& SparseLinear::operator=(SparseLinear&&) noexcept = default;
SparseLinear::~SparseLinear() = default;

Result<SparseLinear> SparseLinear::dense(const TensorView& weight, const LinearOptions& options) {
  if (!options.int8) return finish(cpu::pack_dense(weight), options);
  if (weight.shape.size() != 2) return Error("dense weight: expected a 2-D tensor, got " + shape_str(weight.shape));
  auto q = quantize_weights(weight, QuantType::Int8, "dense weight");
  if (!q.ok()) return q.error();
  return finish(cpu::pack_dense_int8(*q), options);
}

Result<SparseLinear> SparseLinear::sparse24(const Sparse24& weight, const LinearOptions& options) {
  if (!options.int8) return finish(cpu::pack_sparse24(weight), options);
  NMKIT_TRY(validate(weight, "sparse24 weight"));
  auto q = quantize_weights(weight, QuantType::Int8, "sparse24 weight");
  if (!q.ok()) return q.error();
  return finish(cpu::pack_sparse24_int8(*q), options);
}

Result<SparseLinear> SparseLinear::nm(const NMPacked& weight, const LinearOptions& options) {
  if (options.int8) return Error("linear: int8 is offered for dense, sparse24 and slid weights, not nm");
  auto tier = choose_tier(options);
  if (!tier.ok()) return tier.error();
  if (cpu::nm_runs_slid(weight.pattern, *tier)) return finish(cpu::pack_nm_as_slid(weight), options);
  return finish(cpu::pack_nm(weight), options);
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
  if (bias.numel() != packed_->rows || bias.shape.size() != 1) {
    return Error("linear: bias shape " + shape_str(bias.shape) + " does not match rows " + std::to_string(packed_->rows));
  }
  if (!is_prunable(bias.dtype)) return Error("linear: bias dtype " + std::string(dtype_name(bias.dtype)) + " is not f32/bf16/f16");
  packed_->bias = cpu::AlignedBytes::zeros(static_cast<size_t>(packed_->rows) * 4);
  convert_to_f32(bias.dtype, bias.data, packed_->bias.as<float>(), static_cast<size_t>(packed_->rows));
  packed_->has_bias = true;
  if (packed_->many_tokens) cpu::copy_bias(*packed_, *packed_->many_tokens);  // built by an earlier call
  return ok_status();
}

namespace {

// Runs the kernel over all row blocks, split across the pool's threads.
void run_rows(cpu::LinearFn kernel, const cpu::LinearCall& call, int64_t row_blocks) {
  parallel_for(row_blocks, 1, [&](int64_t begin, int64_t end) {
    cpu::LinearCall part = call;
    part.block_begin = begin;
    part.block_end = end;
    kernel(part);
  });
}

// Tokens from which a call decompresses each row block into a dense tile and runs the dense
// micro-kernel on it (design.md 8, compute-bound regime): nm on tiers without slabs (whose in-register
// expansion would be repeated for every 4 tokens), bf16 dense (widened once instead of per 4 tokens) and INT8 sparse24
// (vpermt2b per token costs as much as a second VNNI). Slid INT8 keeps the 2:4 kernel, which executes
// (N-1)/N of the dense products where a tile over K_prime would execute 2(N-1)/N. Below this many
// tokens the scalar decompression would not be repaid.
constexpr int64_t kTileTokens = 64;

bool use_tile(const PackedLinear& w, const cpu::LinearKernels& kernels, int64_t tokens) {
  if (tokens < kTileTokens) return false;
  switch (w.kind) {
    // A tier whose nm kernel expands each K slab once for all tokens (AVX-512) needs no tile: at
    // M=64 and 256 its slabs ran 0.90-0.99x of dense f32 where the tile ran 0.63-0.92x.
    case PackedKind::NM: return !kernels.nm_slabs;
    case PackedKind::Dense: return w.dtype == DType::BF16;
    // Only with a SIMD expansion: the portable one costs about half a dense pass per token block.
    case PackedKind::Sparse24: return w.dtype == DType::I8 && !w.slide && kernels.sparse24_i8_tile != nullptr;
  }
  return false;
}

// Tokens from which sparse24 f32/bf16 weights run on token lanes (the row-lane kernels shuffle the
// activations once per token and FMA): measured equal at 8 tokens, 1.4-1.9x faster from 16.
constexpr int64_t kTokenLaneMin = 8;

// bf16 weights with bf16 activations keep their vdpbf16ps kernel (src/cpu/avx512/linear_token_lanes.cc
// says why).
cpu::LinearFn token_lane_kernel(const PackedLinear& w, const cpu::LinearKernels& kernels, int64_t tokens) {
  if (w.kind != PackedKind::Sparse24 || tokens < kTokenLaneMin) return nullptr;
  if (w.dtype == DType::F32) return kernels.sparse24_f32_lanes;
  if (w.dtype == DType::BF16 && !w.bf16_x) return kernels.sparse24_bf16_lanes;
  return nullptr;
}

void run_tiles(const cpu::LinearKernels& kernels, const cpu::LinearCall& call) {
  const PackedLinear& w = *call.w;
  const cpu::LinearFn dense = w.dtype == DType::I8 ? kernels.dense_i8 : kernels.dense_f32;
  const size_t bytes = cpu::tile_bytes(w);
  const cpu::TileFn nm_tile = w.kind != PackedKind::NM ? nullptr
                              : w.dtype == DType::F32 ? kernels.nm_tile_f32
                                                      : kernels.nm_tile_bf16;
  parallel_for(w.row_blocks, 1, [&](int64_t begin, int64_t end) {
    thread_local cpu::AlignedBytes tile;
    if (tile.size < bytes) tile = cpu::AlignedBytes::zeros(bytes);
    for (int64_t b = begin; b < end; ++b) {
      if (nm_tile != nullptr) nm_tile(w, b, tile.as<float>());
      else if (w.dtype == DType::I8) kernels.sparse24_i8_tile(w, b, tile.as<int8_t>());
      else cpu::decompress_block(w, b, tile.data.get());
      cpu::LinearCall part = call;
      part.block_begin = b;
      part.block_end = b + 1;
      part.tile = tile.data.get();
      dense(part);
    }
  });
}

// One call on one packed form (SparseLinear::apply picks the form).
Status apply_packed(const PackedLinear& w, const float* x, int64_t M, float* y) {
  const cpu::LinearFn kernel = cpu::linear_kernel_for(cpu::kernels_for(w.tier).linear, w.kind, w.dtype);
  NMKIT_ASSERT(kernel != nullptr);
  const bool int8 = w.dtype == DType::I8;
  const int64_t block = token_block(int8 ? w.K_x / 4 : w.K_x);
  // Activations padded with zeros to K_x (quantized, and lifted for a slid weight, for int8), one
  // token block at a time, in buffers reused across calls.
  thread_local std::vector<float> padded;
  thread_local std::vector<int8_t> codes;
  thread_local std::vector<float> scales;
  thread_local std::vector<uint16_t> x_bf16;
  thread_local cpu::AlignedBytes xt;
  const cpu::LinearKernels& table = cpu::kernels_for(w.tier).linear;
  const cpu::LinearFn bf16x_kernel = !w.bf16_x || w.dtype != DType::BF16 ? nullptr
                                     : w.kind == PackedKind::Sparse24     ? table.sparse24_bf16x
                                     : w.kind == PackedKind::NM           ? table.nm_bf16x
                                                                          : nullptr;
  const int64_t first = std::min(block, M);
  if (int8) {
    codes.resize(static_cast<size_t>(first * w.K_x));
    scales.resize(static_cast<size_t>(first));
  } else {
    padded.resize(static_cast<size_t>(first * w.K_x));
  }
  const int64_t cols = w.slide ? w.slide->K_prime() : w.K;  // columns the activation producer writes
  for (int64_t m0 = 0; m0 < M; m0 += block) {
    const int64_t count = std::min(block, M - m0);
    cpu::LinearCall call;
    call.w = &w;
    call.M = count;
    call.y = y + m0 * w.rows;
    call.ldy = w.rows;
    if (int8) {
      const TensorView xv{DType::F32, {count, w.K}, reinterpret_cast<const std::byte*>(x + m0 * w.K)};
      NMKIT_TRY(quantize_tokens_into(xv, QuantType::Int8, w.slide ? &*w.slide : nullptr,
                                     reinterpret_cast<std::byte*>(codes.data()), w.K_x, scales.data(), "x"));
      for (int64_t m = 0; m < count; ++m) std::memset(codes.data() + m * w.K_x + cols, 0, static_cast<size_t>(w.K_x - cols));
      call.x = codes.data();
      call.x_scale = scales.data();
    } else {
      if (bf16x_kernel != nullptr) x_bf16.resize(static_cast<size_t>(count * w.K_x));
      for (int64_t m = 0; m < count; ++m) {
        float* dst = padded.data() + m * w.K_x;
        if (!w.lift_source.empty()) {
          cpu::lift_token(w, x + (m0 + m) * w.K, dst);
        } else {
          std::memcpy(dst, x + (m0 + m) * w.K, static_cast<size_t>(w.K) * 4);
          std::memset(dst + w.K, 0, static_cast<size_t>(w.K_x - w.K) * 4);
        }
        if (w.bf16_x) {
          round_to_bf16(dst, bf16x_kernel != nullptr ? x_bf16.data() + m * w.K_x : nullptr, static_cast<size_t>(w.K_x));
        }
      }
      call.x = padded.data();
      if (bf16x_kernel != nullptr) call.x_bf16 = x_bf16.data();
    }
    const cpu::LinearFn lanes = token_lane_kernel(w, table, count);
    if (lanes != nullptr) {
      const int64_t slabs = (count + cpu::kTokenLanes - 1) / cpu::kTokenLanes;
      const size_t bytes = static_cast<size_t>(slabs * w.K_x * cpu::kTokenLanes) * 4;
      if (xt.size < bytes) xt = cpu::AlignedBytes::zeros(bytes);
      cpu::transpose_token_lanes(padded.data(), count, w.K_x, xt.as<float>());
      call.xt = xt.as<float>();
      run_rows(lanes, call, w.row_blocks);
    } else if (bf16x_kernel != nullptr) {
      run_rows(bf16x_kernel, call, w.row_blocks);
    }
    else if (use_tile(w, table, count)) run_tiles(table, call);
    else run_rows(kernel, call, w.row_blocks);
  }
  return ok_status();
}

}  // namespace

Status SparseLinear::apply(const float* x, int64_t M, float* y) const {
  if (M < 0) return Error("linear: M = " + std::to_string(M) + " is negative");
  if (M == 0) return ok_status();
  const int64_t many = cpu::many_tokens_from(*packed_);
  return apply_packed(many > 0 && M >= many ? cpu::many_tokens_form(*packed_) : *packed_, x, M, y);
}

Result<Tensor> SparseLinear::apply(const TensorView& x) const {
  if (x.shape.size() != 2 || x.cols() != packed_->K) {
    return Error("linear: input shape " + shape_str(x.shape) + " does not match K = " + std::to_string(packed_->K));
  }
  if (!is_prunable(x.dtype)) return Error("linear: input dtype " + std::string(dtype_name(x.dtype)) + " is not f32/bf16/f16");
  std::vector<float> converted;
  const float* src = x.as<float>();
  if (x.dtype != DType::F32) {
    converted.resize(static_cast<size_t>(x.numel()));
    convert_to_f32(x.dtype, x.data, converted.data(), converted.size());
    src = converted.data();
  }
  Tensor y = Tensor::empty(DType::F32, {x.rows(), packed_->rows});
  NMKIT_TRY(apply(src, x.rows(), y.as<float>()));
  return y;
}

int64_t SparseLinear::rows() const { return packed_->rows; }
int64_t SparseLinear::K() const { return packed_->K; }
DType SparseLinear::weight_dtype() const { return packed_->dtype; }
IsaTier SparseLinear::tier() const { return packed_->tier; }

namespace {

// An nm weight that SparseLinear::nm packed slid (f32/bf16 sparse24 over K_prime).
bool nm_packed_slid(const PackedLinear& w) { return w.slide && w.dtype != DType::I8; }

std::string kernel_label(IsaTier tier, const std::string& form, DType dtype, bool bf16_x, const char* how = "") {
  const char* type = dtype == DType::F32 ? " f32" : dtype == DType::BF16 ? " bf16" : " int8";
  return std::string(tier_name(tier)) + " " + form + type + how + (bf16_x ? " (bf16 x)" : "");
}

}  // namespace

LinearWeight SparseLinear::weight_kind() const {
  if (nm_packed_slid(*packed_)) return LinearWeight::NM;
  switch (packed_->kind) {
    case PackedKind::Dense: return LinearWeight::Dense;
    case PackedKind::Sparse24: return LinearWeight::Sparse24;
    case PackedKind::NM: return LinearWeight::NM;
  }
  return LinearWeight::Dense;
}

Pattern SparseLinear::pattern() const {
  if (packed_->kind == PackedKind::NM || nm_packed_slid(*packed_)) return packed_->pattern;
  return Pattern{2, 4};
}

std::string SparseLinear::kernel_name() const {
  const PackedLinear& w = *packed_;
  if (nm_packed_slid(w)) return kernel_label(w.tier, "nm" + w.pattern.str(), w.dtype, w.bf16_x, " as slid");
  std::string form;
  switch (w.kind) {
    case PackedKind::Dense: form = "dense"; break;
    case PackedKind::Sparse24: form = w.slide ? "slid" + w.slide->pattern.str() : "sparse24"; break;
    case PackedKind::NM: form = "nm" + w.pattern.str(); break;
  }
  return kernel_label(w.tier, form, w.dtype, w.bf16_x);
}

std::string SparseLinear::kernel_name(int64_t M) const {
  const PackedLinear& w = *packed_;
  const int64_t many = cpu::many_tokens_from(w);
  if (many == 0 || M < many) return kernel_name();
  if (w.dtype == DType::I8) return kernel_name() + " as dense";
  return kernel_label(w.tier, "nm" + w.pattern.str(), w.dtype, w.bf16_x);
}

size_t SparseLinear::bytes_streamed() const { return packed_->streamed_bytes; }

double SparseLinear::byte_ratio() const {
  const PackedLinear& w = *packed_;
  double dense = static_cast<double>(w.rows) * static_cast<double>(w.K) * static_cast<double>(dtype_size(w.dtype));
  if (w.dtype == DType::I8) dense += static_cast<double>(w.rows) * 4.0;  // per-row scales
  return dense / static_cast<double>(w.streamed_bytes);
}

double SparseLinear::mac_ratio() const {
  const PackedLinear& w = *packed_;
  if (w.slide) return w.slide->ideal_speedup();
  switch (w.kind) {
    case PackedKind::Dense: return 1.0;
    case PackedKind::Sparse24: return 2.0;
    case PackedKind::NM: return static_cast<double>(w.pattern.group) / w.pattern.keep;
  }
  return 1.0;
}

double SparseLinear::theoretical_speedup(int64_t M) const { return M <= 16 ? byte_ratio() : 1.0; }

}  // namespace nmkit
