// Linear layers on the CPU with dense, 2:4 (sparse24) and N:M weights: Y[M, rows] = X[M, K] * W^T
// (+ bias), docs/design.md sections 1 and 8. A SparseLinear is built once from a weight (the weight is
// repacked into the layout its kernel streams best) and applied to many inputs.
//
// Regimes (docs/design.md 8). For M up to about 16 a call is bound by the bytes of weights it streams, so
// the ceiling on speedup over dense is the byte ratio (byte_ratio()); nmkit's kernels stream the
// packed weight once per call (per block of tokens for large M) with several rows in flight and the
// activations in registers or L1, and on AVX-512 sparse24 f32/bf16 weights run on token lanes (X
// transposed so that 16 tokens share a ZMM; each kept value is one broadcast FMA, so only the kept
// products are executed). Larger M is bound by arithmetic; there sparsity pays only where a kernel
// executes just the kept products (token lanes), elsewhere the best a CPU without sparse units can do
// is to match dense, and the fastest dense GEMM here is oneDNN's: from a token count per form (the
// plan, src/linear/linear_plan.cc, holds every threshold) a call runs oneDNN's matmul on dense rows.
// A dense weight's own rows are that input; a sparse weight is decompressed panel by panel (about
// 1 MiB of rows per panel, in the calling threads' scratch) and the GEMM runs on each panel, or
// nmkit's dense kernel on 4-row tiles. No call builds a second form of the weight: a layer holds its
// packed weight and nothing else that grows with it (resident_bytes(); docs/design.md 14).
// kernel_name(M) names the form and kernel a call of M tokens runs.
//
// Non-finite activations: a NaN or infinity in X is an Error naming its row and column, on every
// path and tier (the int8 paths cannot represent it; the float paths would spread it silently to
// every output of its token).
//
// Threads: apply() may be called from several threads at once on one SparseLinear (each call uses
// its own buffers). set_bias() must not run concurrently
// with apply() or another set_bias() on the same SparseLinear. A call splits its work over the pool
// of include/nmkit/threads.h (oneDNN's calls over its OpenMP threads, set to the same count).
//
// How each form is repacked for its kernels is the library's business (src/linear/linear_pack.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nmkit/cpu.h"
#include "nmkit/format.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"
#include "nmkit/weight_format.h"

namespace nmkit {

struct LinearOptions {
  // ISA tier of the kernels; unset = active_tier() (NMKIT_ISA, else the best detected). A tier this
  // machine does not run is an Error.
  std::optional<IsaTier> tier;
  // INT8: weights are quantized per output row (docs/design.md 6) when the SparseLinear is built and the
  // activations per token on every call; Y = scale_x * scale_w * int32 sum (+ bias).
  bool int8 = false;
  // bf16 activations for f32 and bf16 weights: every call rounds X to bf16 (nearest even) first, so
  // all tiers compute exact products of bf16 X with the weights, summed in f32. Where it pays (AVX-512
  // BF16; sparse24 bf16 weights, and nm bf16 weights from 5 tokens) the kernel then multiplies bf16
  // pairs with vdpbf16ps, twice the
  // products per instruction of f32 FMA: for the compute-bound end of decode (M around 16).
  bool bf16_activations = false;
  // Calls of many tokens may run oneDNN's matmul on a dense prepacked copy of the weight (see
  // Regimes). false keeps every call on nmkit's own kernels (for comparison and tests).
  bool onednn = true;
};

class SparseLinear {
 public:
  // A dense [rows, K] weight in f32 or bf16 (f16 is widened to f32). With options.int8 the weight is
  // quantized per row; its zeros stay zeros.
  static Result<SparseLinear> dense(const TensorView& weight, const LinearOptions& options = {});
  // A dense weight stacked by rows from `parts` ([rows_i, K] each, one K and dtype; part 0's rows
  // first): the linears that share an input run as one (q, k and v; gate and up). Parts in f32 or
  // bf16 are used in place: the layer reads their memory on every call, copies nothing, and holds
  // `owner` (say, the file mapping they lie in) to keep it alive; results equal those of the same
  // weight packed from a copy, bit for bit. Other parts (f16, or int8 with options.int8) are converted
  // into rows the layer owns, and `owner` is not held.
  static Result<SparseLinear> dense(const std::vector<TensorView>& parts, std::shared_ptr<const void> owner,
                                    const LinearOptions& options = {});
  // A 2:4 weight in f32 or bf16 (int8 with options.int8).
  static Result<SparseLinear> sparse24(const Sparse24& weight, const LinearOptions& options = {});
  // Any keep:group with group <= 16, f32 or bf16, or INT8 with options.int8 (codes and bitmask: 6:8
  // streams 0.875 bytes a weight against dense INT8's 1, the decode form of 6:8; the slid INT8 form
  // saves 3% at best).
  // On AVX-512 an f32/bf16 keep:2N weight with keep = 2N-2 (4:6, 6:8, 8:10, ..., 14:16) is packed
  // slid, as 2:4 windows over K_prime (docs/design.md 5) with X lifted on each call, which runs the
  // 2:4 kernels: faster than the bitmask kernels for few tokens. Larger calls decompress its rows
  // (tiles, or panels under oneDNN's GEMM) and meet the lifted X.
  static Result<SparseLinear> nm(const NMPacked& weight, const LinearOptions& options = {});
  // INT8 nm (group <= 16) and 2:4 sparse24 layers built a slice of rows at a time by a caller that
  // prunes into each slice: `fill(row0, slice)` writes rows [row0, row0 + slice.rows()) of the
  // pruned weight into `slice` (zeroed; values of dtype `values`, F32 or BF16). The layer equals
  // nm / sparse24 of the whole pruned weight with options.int8 (implied), byte for byte, while only
  // a slice of about 2 MiB per thread ever exists in the float form and no codes tensor of the whole
  // weight does (a model pruned and quantized on load, docs/design.md 11.7). Slices are filled on
  // the pool's threads, several at once: `fill` must be safe to call concurrently on different
  // slices. The first failed slice's Error, in row order, is returned.
  static Result<SparseLinear> nm_int8_by_rows(int64_t rows, int64_t K, Pattern pattern, DType values,
                                              const std::function<Status(int64_t row0, NMPacked& slice)>& fill,
                                              const LinearOptions& options = {});
  static Result<SparseLinear> sparse24_int8_by_rows(int64_t rows, int64_t K, DType values,
                                                    const std::function<Status(int64_t row0, Sparse24& slice)>& fill,
                                                    const LinearOptions& options = {});
  // A SlideSparse weight: [rows, geometry.K_prime], 2:4-compliant, from a keep:2N weight of logical
  // width geometry.K (docs/design.md 5). Runs as INT8 2:4 on activations lifted to K_prime while they are
  // quantized (options.int8 is implied). From a few tokens per call (the plan) its rows are
  // decompressed over K_prime (tiles under nmkit's dense INT8 kernel, or panels under oneDNN's GEMM):
  // a CPU has no sparse unit for the 2:4 form to feed, and folding the rows back onto K costs a
  // scatter per value, more than the GEMM it saves.
  static Result<SparseLinear> slid(const TensorView& slid_weight, const SlideGeometry& geometry,
                                   const LinearOptions& options = {});

  SparseLinear(SparseLinear&&) noexcept;
  SparseLinear& operator=(SparseLinear&&) noexcept;
  ~SparseLinear();

  // A bias of `rows` f32 (or bf16/f16) values added to every output row.
  Status set_bias(const TensorView& bias);

  // Y (M, rows) f32 row-major = X (M, K) f32 row-major * W^T (+ bias). Returns an Error for M < 0.
  Status apply(const float* x, int64_t M, float* y) const;
  // The same with x a [M, K] tensor (f32, bf16 or f16) and y [M, rows] f32. The result is that of
  // x widened to f32; a layer with bf16 activations whose call runs a bf16 GEMM takes bf16 x as it
  // is (no conversion pass: what a model keeping its activations in bf16 saves).
  Status apply(const TensorView& x, float* y) const;
  // The same returning Y as a new [M, rows] f32 tensor.
  Result<Tensor> apply(const TensorView& x) const;

  int64_t rows() const;
  int64_t K() const;  // logical input features (of the unslid weight for a slid one)
  WeightFormat weight_format() const;
  DType weight_dtype() const;  // F32, BF16 or I8
  Pattern pattern() const;     // 2:4 for sparse24 and slid, the stored pattern for nm (dense: 2:4, unused)
  IsaTier tier() const;
  // The form of a one-token call: "avx512 sparse24 bf16", "scalar dense f32", "avx2 slid6:8 int8",
  // "avx512 nm6:8 f32 as slid", ... (kernel_name(1)).
  std::string kernel_name() const;
  // The form and kernel a call of M tokens runs, from the one plan apply() follows: kernel_name()
  // plus " token lanes", " slabs", " tiles" or " onednn" where that route runs, and "as dense" (slid
  // INT8) or the nm form (nm packed slid) where a slid weight runs its unslid form.
  std::string kernel_name(int64_t M) const;

  // Bytes of weight (values, indices or mask, scales) one call of M tokens streams: the packed form,
  // which every route reads (tiles and panels are decompressed from it). Without M: a one-token call.
  size_t bytes_streamed() const;
  size_t bytes_streamed(int64_t M) const;
  // The memory-bound ceiling on speedup: the bytes of the same weight stored dense in the same dtype
  // (rows * K * dtype size; for int8 with its per-row scales) over bytes_streamed(M).
  double byte_ratio() const;
  double byte_ratio(int64_t M) const;
  // The arithmetic ceiling: dense multiply-adds over the multiply-adds of the sparse form (2 for
  // 2:4, group/keep for nm, N/(N-1) for slid). A CPU without sparse units reaches it only where it
  // is memory-bound, so theoretical_speedup(M) is byte_ratio(M) for decode (M <= 16) and 1 beyond.
  double mac_ratio() const;
  double theoretical_speedup(int64_t M) const;

  // Bytes the layer holds: its packed weight (values, indices or masks, int8 scales and sums), bias
  // and lift map, and the weight rows it reads in place (borrowed_bytes(): memory it keeps alive,
  // whose pages count in the process's RSS once read). Nothing is added by calls: no second form of
  // the weight is ever built, and a call's scratch (activation copies, tiles and panels of
  // decompressed rows, at most about 1 MiB of weight per thread) belongs to the calling threads and is
  // shared by every layer.
  size_t resident_bytes() const;
  size_t borrowed_bytes() const;

  struct Impl;  // opaque: defined in src/linear

 private:
  friend struct SparseLinearAccess;
  explicit SparseLinear(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nmkit
