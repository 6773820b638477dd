// The output error of a pruned linear on its calibration inputs (docs/design.md section 12),
// ||X W^T - X Wp^T||_F / ||X W^T||_F, from the Hessian H = X^T X instead of X itself:
// ||X D^T||_F^2 = trace(D H D^T), which costs rows * K^2 instead of tokens * K * rows.
#include <algorithm>
#include <cmath>
#include <string>

#include "calib/method_common.h"
#include "nmkit/calib.h"

namespace nmkit {
Result<double> output_error(const TensorView& w, const TensorView& pruned, const double* H) {
  if (w.shape.size() != 2 || pruned.shape != w.shape) {
    return Error("output error needs two 2-D weights of one shape, got " + shape_str(w.shape) +
                 " and " + shape_str(pruned.shape));
  }
  const int64_t rows = w.rows(), K = w.cols();
  const std::vector<float> wf = to_f32(w), pf = to_f32(pruned);
  std::vector<double> a(wf.begin(), wf.end());
  std::vector<double> d(static_cast<size_t>(rows * K));
  for (int64_t i = 0; i < rows * K; ++i) d[i] = double(wf[i]) - double(pf[i]);
  const double dense = calib_detail::quadratic_trace(a, rows, K, H);
  if (!(dense > 0)) return 0.0;
  // trace(D H D^T) >= 0 in exact arithmetic; rounding can leave a tiny negative for D ~ 0.
  const double diff = std::max(0.0, calib_detail::quadratic_trace(d, rows, K, H));
  return std::sqrt(diff / dense);
}

}  // namespace nmkit
