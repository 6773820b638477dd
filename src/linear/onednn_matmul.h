// oneDNN's matmul on dense weights in plain rows: the compute-bound regime (many tokens per call) of
// every SparseLinear form, where no CPU kernel does better than a register-blocked dense GEMM and
// oneDNN's brgemm kernels are that GEMM (issue 12; the plan, src/linear/linear_plan.h, says from which
// M and why). A dense layer's own rows are its input; a sparse layer decompresses panels of rows into
// scratch for it (src/linear/sparse_linear.cc). oneDNN (Debian libdnnl) is a required dependency; its
// headers stay inside onednn_matmul.cc.
//
// Arithmetic (what the callers' tests hold it to):
//   F32:  y = sum over K of x * w in f32 (oneDNN's order): within the f32 tolerance of the kernels.
//   BF16: bf16 x times bf16 w, exact products summed in f32 (vdpbf16ps): the bf16-activation rule.
//   INT8: s8 x times s8 w summed in int32: exact, so Y (epilogue by the caller) is bit for bit.
#pragma once

#include <cstdint>

#include "nmkit/cpu.h"
#include "nmkit/status.h"

namespace nmkit::linear {

enum class MatmulType { F32, Bf16, Int8 };

// The ISA tier oneDNN's kernels run at in this process: the detected one, or the lower tier NMKIT_ISA
// asks for (oneDNN is capped to it before its first kernel, so that a forced tier runs every path,
// oneDNN's included, as a machine of that tier would; docs/design.md 8.2). Any code that runs oneDNN
// (the benchmarks' baselines too) calls this before its first oneDNN call. The scalar tier has no
// oneDNN route and leaves oneDNN uncapped.
IsaTier onednn_tier();

// Whether this machine's oneDNN runs `type` (created once per type and process: a bf16 matmul needs
// AVX-512 BF16 or AMX, for example), and for INT8 runs it exactly (int32 sums: AVX-512 VNNI or AMX).
bool onednn_runs(MatmulType type);

// y (M, n), contiguous = x (M, K) * W^T, W being n rows of K values at stride ldw elements in plain
// row-major order ([n, K] with row stride ldw), read where it lies: no copy of it is kept (oneDNN's
// brgemm copies blocks of it into its scratch as it goes; docs/data.md has what that costs against
// a prepacked copy). x: f32, bf16 bits or int8 codes, rows ldx elements apart; y: f32 sums (F32,
// Bf16) or int32 sums (Int8, written as int32 into y's bytes). threads: OpenMP threads the GEMM runs
// on. Primitives are made once per (type, shape, strides, threads) and kept in a small process-wide
// cache. Safe to call from several threads at once.
Status onednn_gemm(MatmulType type, const void* x, int64_t M, int64_t ldx, const void* w, int64_t n, int64_t K,
                   int64_t ldw, void* y, int threads);

}  // namespace nmkit::linear
