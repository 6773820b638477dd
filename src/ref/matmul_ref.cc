// Scalar reference linear layers, dense and on the compressed formats. Kept deliberately plain: one
// float64 accumulator per output, products in increasing k order.
#include <cstring>
#include <string>
#include <vector>

#include "nmkit/reference.h"
#include "nmkit/threads.h"

namespace nmkit {
namespace {

Status check_operand(const TensorView& t, const char* what) {
  if (t.shape.size() != 2 || t.shape[0] < 0 || t.shape[1] < 0) {
    return Error(std::string(what) + " must be 2-D, got shape " + shape_str(t.shape));
  }
  if (!is_prunable(t.dtype)) {
    return Error(std::string(what) + " has dtype " + std::string(dtype_name(t.dtype)) +
                 ", expected F32, F16 or BF16");
  }
  if (t.data == nullptr && t.numel() > 0) return Error(std::string(what) + " has no data");
  return ok_status();
}

Status check_x(const TensorView& x, int64_t K) {
  NMKIT_TRY(check_operand(x, "x"));
  if (x.cols() != K) {
    return Error("x has shape " + shape_str(x.shape) + ", expected [M, " + std::to_string(K) +
                 "] (K of the weight)");
  }
  return ok_status();
}

// Calls dot(m, r, xrow) -> double for every output, rows in parallel (each output is independent,
// so the result does not depend on the thread count).
template <class Dot>
Tensor run(const std::vector<float>& xf, int64_t M, int64_t rows, int64_t K, const Dot& dot) {
  Tensor y = Tensor::empty(DType::F32, {M, rows});
  float* out = y.as<float>();
  if (M > 0 && rows > 0) {
    parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, K * M)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     for (int64_t m = 0; m < M; ++m) {
                       out[m * rows + r] = static_cast<float>(dot(r, xf.data() + m * K));
                     }
                   }
                 });
  }
  return y;
}

// All elements as f32; an empty tensor may have no storage at all, so it is not converted.
std::vector<float> floats_of(const TensorView& t) {
  return t.numel() > 0 ? to_f32(t) : std::vector<float>();
}

double speedup(int64_t K, int64_t executed_per_row) {
  return executed_per_row > 0 ? static_cast<double>(K) / static_cast<double>(executed_per_row)
                              : 1.0;
}

}  // namespace

Result<MatmulResult> ref_dense_matmul(const TensorView& w, const TensorView& x) {
  NMKIT_TRY(check_operand(w, "weight"));
  const int64_t rows = w.rows(), K = w.cols();
  NMKIT_TRY(check_x(x, K));
  const std::vector<float> wf = floats_of(w);
  const std::vector<float> xf = floats_of(x);
  MatmulResult result;
  result.y = run(xf, x.rows(), rows, K, [&](int64_t r, const float* xr) {
    const float* wr = wf.data() + r * K;
    double acc = 0.0;
    for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(wr[k]) * static_cast<double>(xr[k]);
    return acc;
  });
  result.theoretical_speedup = 1.0;
  return result;
}

Result<MatmulResult> ref_sparse_matmul(const Sparse24& w, const TensorView& x) {
  NMKIT_TRY(validate(w, "weight"));
  const int64_t K = w.K, groups = w.K_pad() / 4, stride = w.meta_stride();
  NMKIT_TRY(check_x(x, K));
  const std::vector<float> vf = floats_of(w.values.view());
  const std::vector<float> xf = floats_of(x);
  const uint8_t* meta = w.meta.as<uint8_t>();
  MatmulResult result;
  result.y = run(xf, x.rows(), w.rows(), K, [&](int64_t r, const float* xr) {
    const float* vr = vf.data() + r * groups * 2;
    const uint8_t* mr = meta + r * stride;
    double acc = 0.0;
    for (int64_t g = 0; g < groups; ++g) {
      const unsigned nibble = (mr[g / 2] >> ((g & 1) * 4)) & 0xFu;
      const int64_t k0 = g * 4 + (nibble & 3u), k1 = g * 4 + (nibble >> 2);
      if (k0 < K) acc += static_cast<double>(vr[g * 2]) * static_cast<double>(xr[k0]);
      if (k1 < K) acc += static_cast<double>(vr[g * 2 + 1]) * static_cast<double>(xr[k1]);
    }
    return acc;
  });
  result.theoretical_speedup = speedup(K, w.K_pad() / 2);
  return result;
}

Result<MatmulResult> ref_sparse_matmul(const NMPacked& w, const TensorView& x) {
  NMKIT_TRY(validate(w, "weight"));
  const int64_t K = w.K, groups = w.groups(), stride = w.mask_stride();
  const int keep = w.pattern.keep, group = w.pattern.group;
  NMKIT_TRY(check_x(x, K));
  const std::vector<float> vf = floats_of(w.values.view());
  const std::vector<float> xf = floats_of(x);
  const uint8_t* mask = w.mask.as<uint8_t>();
  MatmulResult result;
  result.y = run(xf, x.rows(), w.rows(), K, [&](int64_t r, const float* xr) {
    const float* vr = vf.data() + r * groups * keep;
    const uint8_t* mr = mask + r * stride;
    double acc = 0.0;
    int64_t slot = 0;
    for (int64_t k = 0; k < groups * group; ++k) {
      if (((mr[k >> 3] >> (k & 7)) & 1u) == 0) continue;
      if (k < K) acc += static_cast<double>(vr[slot]) * static_cast<double>(xr[k]);
      ++slot;
    }
    return acc;
  });
  result.theoretical_speedup = speedup(K, groups * keep);
  return result;
}

}  // namespace nmkit
