// Slots of the passes over a linear layer's activations that run outside its kernels: the scan for
// NaN and infinity every call makes, the conversion to bf16 (bits for a bf16 GEMM, rounded f32
// for the bf16-activation kernels), and the transpose onto token lanes (the token-lane kernels' X).
// Filled per tier by src/cpu/activation_dispatch.cc; every tier reproduces the per-value rule of
// f32_to_bf16 (include/nmkit/dtype.h) bit for bit, and moves X's bits unchanged onto token lanes
// (docs/design.md section 8.2: around a oneDNN GEMM of a SmolLM2 layer these passes cost as much as
// half the GEMM when compiled for the baseline ISA).
//
// Tier translation units follow the rules of quant_kernels.h: intrinsics, plain loops, libc calls,
// functions in an anonymous namespace and out-of-line baseline helpers only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nmkit::cpu {

// True when none of x[0, n) is a NaN or an infinity (all exponent bits set).
using AllFiniteFn = bool (*)(const float* x, size_t n);
// The same for n bf16 values given as their bits (X that arrives in bf16).
using AllFiniteBf16Fn = bool (*)(const uint16_t* bits, size_t n);

// For each of x[0, n): bits[i] = f32_to_bf16(x[i]) and rounded[i] = that bf16 value widened to f32.
// Either output may be null (not written); rounded may be x itself (rounding in place). Returns
// whether every x[i] was finite, judged on the input: a finite value that rounds to infinity
// counts as finite, as the input check before rounding would have judged it.
using ToBf16Fn = bool (*)(const float* x, size_t n, float* rounded, uint16_t* bits);

// X on token lanes (docs/design.md 8.4): the `tokens` rows of x (row stride ldx, K values each) as
// ceil(tokens/16) slabs of (K_x, 16) floats: slab s, row k holds x[16s .. 16s+15][k], zero for tokens
// past `tokens` and for k in [K, K_x), so the kernels need neither masks nor X's padded copy.
// Requires K <= K_x, K <= ldx (ldx = K for the caller's X, K = K_x = ldx for a lifted copy) and K_x a
// multiple of 16 (the packs pad K to their 32-wide chunks).
using ToTokenLanesFn = void (*)(const float* x, int64_t ldx, int64_t tokens, int64_t K, int64_t K_x, float* xt);

struct ActivationKernels {
  AllFiniteFn all_finite = nullptr;
  AllFiniteBf16Fn all_finite_bf16 = nullptr;
  ToBf16Fn to_bf16 = nullptr;
  ToTokenLanesFn to_token_lanes = nullptr;
};

namespace scalar {
bool all_finite(const float* x, size_t n);
bool all_finite_bf16(const uint16_t* bits, size_t n);
bool to_bf16(const float* x, size_t n, float* rounded, uint16_t* bits);
void to_token_lanes(const float* x, int64_t ldx, int64_t tokens, int64_t K, int64_t K_x, float* xt);
}  // namespace scalar
namespace avx2 {
bool all_finite(const float* x, size_t n);
bool all_finite_bf16(const uint16_t* bits, size_t n);
bool to_bf16(const float* x, size_t n, float* rounded, uint16_t* bits);
}  // namespace avx2
namespace avx512 {
bool all_finite(const float* x, size_t n);
bool all_finite_bf16(const uint16_t* bits, size_t n);
bool to_bf16(const float* x, size_t n, float* rounded, uint16_t* bits);
void to_token_lanes(const float* x, int64_t ldx, int64_t tokens, int64_t K, int64_t K_x, float* xt);
}  // namespace avx512

}  // namespace nmkit::cpu
