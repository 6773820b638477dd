// The one plan of a SparseLinear call: from the packed weight and the tokens per call M, which form
// of the weight is read and which kernel runs on it. SparseLinear::apply executes the plan;
// kernel_name(M), bytes_streamed(M) and byte_ratio(M) describe the same plan, so a benchmark row names
// the kernel that ran. Every token-count threshold of nmkit's linear layer is in linear_plan.cc, each
// with the measurement that chose it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cpu/linear_kernels.h"
#include "linear/onednn_matmul.h"
#include "nmkit/status.h"

namespace nmkit::linear {

// The packed weight of a SparseLinear: the one form it holds.
struct LinearLayer {
  std::unique_ptr<cpu::PackedLinear> packed;
  bool onednn = true;  // LinearOptions::onednn
};

enum class Route {
  Rows,        // the tier's kernel over row blocks: weights streamed once per block of tokens
  TokenLanes,  // sparse24 f32/bf16: X transposed to 16-token lanes, one FMA per kept value
  Bf16Pairs,   // sparse24 or nm bf16 weights times bf16 activations, vdpbf16ps over pairs
  Slabs,       // nm: each K slab of a row block expanded once for all the call's tokens
  Tiles,       // row blocks decompressed into dense 4-row tiles, the dense micro-kernel on each
  Onednn,      // oneDNN's GEMM on dense rows: a dense weight's own, or panels decompressed into scratch
};

struct LinearPlan {
  WeightFormat kind = WeightFormat::Dense;  // of the packed weight
  DType dtype = DType::F32;
  Route route = Route::Rows;
  MatmulType matmul = MatmulType::F32;  // Route::Onednn only
  int onednn_threads = 1;               // Route::Onednn only: the pool's threads, or 1 for a short call
  // Route::TokenLanes only: the threads split the call's tokens (each transposes its own and runs
  // every row over them) instead of its rows (each reading all of X^T).
  bool lanes_split_tokens = false;
};

// The plan for M >= 1 tokens per call.
LinearPlan plan_for(const LinearLayer& layer, int64_t M);

// The kernel slot of a plan's route on weight w (null for Route::Onednn).
cpu::LinearFn plan_kernel(const LinearPlan& plan, const cpu::PackedLinear& w);

// "avx512 sparse24 f32 token lanes", "avx512 dense bf16 onednn", "avx512 slid6:8 int8 tiles", ...
std::string plan_name(const cpu::PackedLinear& w, const LinearPlan& plan);

// Bytes of weight (values, indices or masks, int8 scales and sums) one call of the plan streams.
size_t plan_bytes(const cpu::PackedLinear& w, const LinearPlan& plan);

// About how long one thread takes for a call of `tokens` tokens on packed form w (its weight bytes at
// one core's stream rate, or its dense-equivalent products at one core's rate, whichever is longer).
// The pool splits a call, and oneDNN (which always starts the whole team) runs one, only when that
// saves more than starting the workers costs (core/thread_costs.h grain_for).
double one_thread_seconds(const cpu::PackedLinear& w, int64_t tokens);
// The same for oneDNN's GEMM of `type` on w's dense rows (oneDNN's own one-thread rates).
double onednn_one_thread_seconds(const cpu::PackedLinear& w, int64_t tokens, MatmulType type);

// Tokens up to which a call is bound by the bytes of weight it streams (theoretical_speedup).
int64_t memory_bound_tokens();

}  // namespace nmkit::linear
