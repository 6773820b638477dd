// Least-squares reconstruction of the kept weights after the mask is chosen ("beyond the papers",
// issue 11; the "free lunch" finding of arXiv 2510.14444 that refitting kept weights on calibration
// outputs recovers much of the pruning loss). With the mask fixed, each row r solves
//   min over v supported on S_r of (v - w_r) Hd (v - w_r)^T,   Hd = H + damping * mean(diag H) * I,
// i.e. the layer's output error on the calibration inputs (damped as SparseGPT's H is). Rows share Hd,
// so all rows run Jacobi-preconditioned conjugate gradient together: one GEMM (rows x K x K) per
// iteration plus per-row scalars. CG never raises the objective above its starting point, so
// starting from SparseGPT's weights it can only lower SparseGPT's (damped) error.
#include <cblas.h>

#include <cmath>
#include <string>

#include "calib/blas_kernels.h"
#include "nmkit/calib.h"

namespace nmkit {

Result<ReconstructResult> reconstruct_kept(const TensorView& w, Tensor& pruned, const double* H,
                                           int iterations, double damping, std::string_view name) {
  calib_detail::select_blas_kernels();
  const std::string where = name.empty() ? std::string() : "layer '" + std::string(name) + "': ";
  if (w.shape.size() != 2 || pruned.shape() != w.shape || !is_prunable(pruned.dtype())) {
    return Error(where + "reconstruction needs the weight and its pruned form of one 2-D shape, got " +
                 shape_str(w.shape) + " and " + shape_str(pruned.shape()));
  }
  const int64_t rows = w.rows(), K = w.cols();
  ReconstructResult out;
  if (rows == 0 || K == 0 || iterations <= 0) return out;
  std::vector<double> Hd(H, H + K * K);
  double mean = 0;
  for (int64_t k = 0; k < K; ++k) {
    if (Hd[k * K + k] == 0) Hd[k * K + k] = 1;  // a dead input: its weight is pruned or zero anyway
    mean += Hd[k * K + k] / static_cast<double>(K);
  }
  std::vector<double> inv_diag(K);
  for (int64_t k = 0; k < K; ++k) {
    Hd[k * K + k] += damping * mean;
    inv_diag[k] = 1.0 / Hd[k * K + k];
  }
  const std::vector<float> wf = to_f32(w), vf = pruned.to_f32();
  const size_t n = static_cast<size_t>(rows * K);
  std::vector<double> V(vf.begin(), vf.end()), D(n), R(n), Z(n), P(n), Q(n);
  std::vector<uint8_t> mask(n);
  for (size_t i = 0; i < n; ++i) {
    mask[i] = vf[i] != 0;
    D[i] = double(wf[i]) - V[i];
  }
  auto times_h = [&](const std::vector<double>& a, std::vector<double>& dst) {
    cblas_dsymm(CblasRowMajor, CblasRight, CblasUpper, static_cast<int>(rows), static_cast<int>(K), 1.0,
                Hd.data(), static_cast<int>(K), a.data(), static_cast<int>(K), 0.0, dst.data(),
                static_cast<int>(K));
  };
  auto objective = [&](const std::vector<double>& diff) {
    times_h(diff, Q);
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += diff[i] * Q[i];
    return s;
  };
  out.objective_before = objective(D);
  // R = mask o ((W - V) Hd): the negative half-gradient; Q still holds D Hd.
  for (size_t i = 0; i < n; ++i) R[i] = mask[i] ? Q[i] : 0.0;
  std::vector<double> rz(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      const size_t i = r * K + k;
      Z[i] = R[i] * inv_diag[k];
      P[i] = Z[i];
      rz[r] += R[i] * Z[i];
    }
  }
  for (int it = 0; it < iterations; ++it) {
    times_h(P, Q);
    for (int64_t r = 0; r < rows; ++r) {
      double pq = 0;
      for (int64_t k = 0; k < K; ++k) pq += P[r * K + k] * Q[r * K + k];
      if (!(pq > 0) || rz[r] == 0) {  // converged row (or no kept weight)
        for (int64_t k = 0; k < K; ++k) P[r * K + k] = 0;
        rz[r] = 0;
        continue;
      }
      const double alpha = rz[r] / pq;
      double rz_next = 0;
      for (int64_t k = 0; k < K; ++k) {
        const size_t i = r * K + k;
        V[i] += alpha * P[i];
        R[i] -= mask[i] ? alpha * Q[i] : 0.0;
        Z[i] = R[i] * inv_diag[k];
        rz_next += R[i] * Z[i];
      }
      const double beta = rz_next / rz[r];
      for (int64_t k = 0; k < K; ++k) P[r * K + k] = Z[r * K + k] + beta * P[r * K + k];
      rz[r] = rz_next;
    }
    ++out.iterations;
  }
  std::vector<float> result(n);
  for (size_t i = 0; i < n; ++i) {
    result[i] = mask[i] ? static_cast<float>(V[i]) : 0.0f;
    if (!std::isfinite(result[i])) {
      return Error(where + "reconstruction diverged at row " + std::to_string(i / K) + ", column " +
                   std::to_string(i % K));
    }
  }
  const std::vector<float> before = pruned.to_f32();
  convert_from_f32(pruned.dtype(), result.data(), pruned.data(), n);
  const std::vector<float> stored = pruned.to_f32();
  for (size_t i = 0; i < n; ++i) D[i] = double(wf[i]) - double(stored[i]);
  out.objective_after = objective(D);
  if (out.objective_after > out.objective_before) {  // rounding to f16/bf16 can undo a tiny gain
    convert_from_f32(pruned.dtype(), before.data(), pruned.data(), n);
    out.objective_after = out.objective_before;
    out.reverted = true;
  }
  return out;
}

}  // namespace nmkit
