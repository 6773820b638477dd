// See method_common.h.
#include "calib/method_common.h"

#include <cblas.h>

#include <cmath>
#include <cstdio>

#include "calib/blas_kernels.h"
#include "prune/row_sums.h"

namespace nmkit::calib_detail {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string layer_prefix(std::string_view name) {
  return name.empty() ? std::string() : "layer '" + std::string(name) + "': ";
}

Result<CheckedHessian> checked_hessian(const double* H, int64_t K, double damping, std::string_view name) {
  if (K < 0) return Error(layer_prefix(name) + "negative Hessian size " + std::to_string(K));
  if (!(damping >= 0) || !std::isfinite(damping)) {
    return Error(layer_prefix(name) + "damping must be a finite fraction >= 0, got " + num(damping));
  }
  CheckedHessian out;
  out.h.assign(static_cast<size_t>(K * K), 0.0);
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = i; j < K; ++j) {
      const double v = H[i * K + j];
      if (!std::isfinite(v)) {
        return Error(layer_prefix(name) + "Hessian at [" + std::to_string(i) + ", " + std::to_string(j) +
                     "] is " + num(v));
      }
      out.h[i * K + j] = v;
      out.h[j * K + i] = v;
    }
  }
  double diag_sum = 0;
  for (int64_t k = 0; k < K; ++k) {
    double& d = out.h[k * K + k];
    if (d == 0) {  // an input that is zero on every calibration token
      d = 1;
      out.dead.push_back(k);
    }
    diag_sum += d;
  }
  out.mean_diag = K > 0 ? diag_sum / static_cast<double>(K) : 0.0;
  return out;
}

Result<std::vector<float>> finite_f32(const TensorView& w, std::string_view name) {
  std::vector<float> out = to_f32(w);
  const int64_t K = w.cols();
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      return Error(layer_prefix(name) + "weight at row " + std::to_string(static_cast<int64_t>(i) / K) +
                   ", column " + std::to_string(static_cast<int64_t>(i) % K) + " is " + num(out[i]));
    }
  }
  return out;
}

double quadratic_trace(const std::vector<double>& a, int64_t rows, int64_t K, const double* H) {
  select_blas_kernels();
  std::vector<double> ah(static_cast<size_t>(rows * K));
  cblas_dsymm(CblasRowMajor, CblasRight, CblasUpper, static_cast<int>(rows), static_cast<int>(K), 1.0, H,
              static_cast<int>(K), a.data(), static_cast<int>(K), 0.0, ah.data(), static_cast<int>(K));
  double sum = 0;
  for (int64_t i = 0; i < rows * K; ++i) sum += a[i] * ah[i];
  return sum;
}

PruneSums kept_sums(const std::vector<float>& original, const std::vector<uint8_t>& kept, int64_t rows,
                    int64_t K) {
  PruneSums sums;
  std::vector<int32_t> kept32(static_cast<size_t>(K));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) kept32[k] = kept[r * K + k] != 0 ? 1 : 0;
    prune_detail::RowSums lanes;
    lanes.add(original.data() + r * K, kept32.data(), K);
    PruneSums rs;
    rs.total_count = K;
    rs.pruned_count = K - lanes.kept;
    rs.abs_kept = prune_detail::RowSums::total(lanes.abs_kept);
    rs.abs_pruned = prune_detail::RowSums::total(lanes.abs_pruned);
    rs.sq_pruned = prune_detail::RowSums::total(lanes.sq_pruned);
    rs.sq_total = prune_detail::RowSums::total(lanes.sq_kept) + rs.sq_pruned;
    sums += rs;
  }
  return sums;
}

Result<MovedWeights> moved_weights(const TensorView& w, const std::vector<float>& original,
                                   const std::vector<double>& values, const std::vector<uint8_t>& kept,
                                   std::string_view method, std::string_view name) {
  const int64_t rows = w.rows(), K = w.cols();
  MovedWeights out;
  std::vector<float> pruned(static_cast<size_t>(rows * K));
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = pruned.data() + r * K;
    for (int64_t k = 0; k < K; ++k) dst[k] = kept[r * K + k] != 0 ? static_cast<float>(values[r * K + k]) : 0.0f;
  }
  out.sums = kept_sums(original, kept, rows, K);
  out.pruned = Tensor::empty(w.dtype, w.shape);
  convert_from_f32(w.dtype, pruned.data(), out.pruned.data(), pruned.size());
  const std::vector<float> stored = out.pruned.to_f32();  // after rounding to the weight's dtype
  double sq_diff = 0, sq_total = 0;
  for (int64_t i = 0; i < rows * K; ++i) {
    if (!std::isfinite(stored[i])) {
      return Error(layer_prefix(name) + std::string(method) + " update overflowed " +
                   std::string(dtype_name(w.dtype)) + " at row " + std::to_string(i / K) + ", column " +
                   std::to_string(i % K) + " (value " + num(values[i]) +
                   "): the Hessian is too ill-conditioned");
    }
    const double d = double(original[i]) - double(stored[i]);
    sq_diff += d * d;
    sq_total += double(original[i]) * double(original[i]);
  }
  out.weight_relative_error = sq_total > 0 ? std::sqrt(sq_diff / sq_total) : 0.0;
  return out;
}

}  // namespace nmkit::calib_detail
