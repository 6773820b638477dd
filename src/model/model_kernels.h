// The f32 pieces of the forward pass around the linears (docs/design.md 11.2 and 11.8): RMSNorm,
// rope NORM and NEOX, causal attention of one query over a KV cache, SwiGLU and GELU-tanh gates.
// Each is compiled for AVX-512, AVX2+FMA and baseline x86-64 (one clone per tier, run on the
// linears' tier), on that tier's register width without reordering any float sum it must not
// reorder.
#pragma once

#include <cstdint>

namespace nmkit::model {

// n rows of d: y[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i] per row, the sum of squares in double
// and in index order (as ggml does), so a row's result does not depend on the other rows of the call.
void rms_norm_rows(const float* x, const float* weight, int64_t n, int64_t d, float eps, float* y);

// e^x for x <= 88 with a relative error below 2e-7 (Cephes' degree-6 polynomial on
// [-ln2/2, ln2/2] and an exact 2^n); below -87.3 it returns a value under 1.2e-38 rather than 0.
// A vector at a time (libm's expf does not vectorize, nor did this polynomial written as a loop:
// 49152 values took 113 us on AVX-512 as a loop and 13 us as vectors); a value's result does not
// depend on its position in x.
void exp_inplace(float* x, int64_t n);

// Rope on `heads` heads of head_dim values each (stride head_stride between heads): pair i turns by the
// angle whose cosine and sine are cos_sin[2i], cos_sin[2i+1]. Pair i is (2i, 2i+1) in mode NORM and
// (i, i + head_dim/2) in mode NEOX (ggml's rope types; docs/design.md 11.1 and 11.8).
void rope_rotate(float* x, int64_t heads, int64_t head_stride, int64_t head_dim, const float* cos_sin, bool neox);
// cos_sin[2i], cos_sin[2i+1] = cos, sin of p * scale * base^(-2i/head_dim) / factors[i] (factors
// nullptr: all 1; ggml's freq_scale and freq_factors), computed in double.
void rope_angles(int64_t p, int64_t head_dim, float base, float scale, const float* factors, float* cos_sin);

// Up to kMaxQueries queries that read the same keys and values (the heads of one GQA group at a few
// consecutive positions) over their cached positions: query h attends to the first n_pos[h] positions,
// out[h] (head_dim) = softmax(scale * q[h] . K[:n_pos[h]]) V[:n_pos[h]], with Kt (head_dim, kt_stride)
// the keys transposed and V (max n_pos, head_dim); positions past a query's n_pos must hold finite
// values (they are read and weighted by exactly 0). scores holds nq * max(n_pos) floats. The queries
// share every load of K and V (one vector load feeds nq multiply-adds, which also keeps nq
// independent sums in flight), and each score is a dot product summed over head_dim in order, by the
// same vector code for every position (head_dim <= 256), so a query's output does not depend on the
// other queries of the call.
constexpr int kMaxQueries = 12;
void attend(const float* const* q, const int64_t* n_pos, int nq, const float* Kt, int64_t kt_stride, const float* V,
            int64_t head_dim, float scale, float* scores, float* const* out);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g).
void swiglu(const float* gate, const float* up, int64_t n, float* out);
// out[i] = gelu_tanh(gate[i]) * up[i], gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))),
// computed as g / (1 + e^(-2y)) with y = sqrt(2/pi) (g + 0.044715 g^3) (the same value: 1 + tanh(y)
// = 2 / (1 + e^(-2y))), on exp_inplace's e^x.
void geglu(const float* gate, const float* up, int64_t n, float* out);

}  // namespace nmkit::model
