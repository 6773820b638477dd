// In-group swaps (docs/design.md 12.3): after any method has chosen a mask, exchange a kept and a
// pruned weight of one group whenever the exact change of the damped output error says it pays.
//
// Per row, with e = w - v (v the pruned row) and g = Hd e, the objective is f = e . g. A swap
// prunes kept j (its value b = v_j goes: e_j += b) and keeps pruned i at the value a that is best
// with every other weight held (e_i -= a). Δe = b u_j - a u_i, so
//   Δf(a) = 2 b g_j - 2 a g_i + b² Hd_jj + a² Hd_ii - 2 a b Hd_ij,
// least at a = (g_i + b Hd_ij) / Hd_ii, where Δf = 2 b g_j + b² Hd_jj - (g_i + b Hd_ij)² / Hd_ii.
// Exact, O(1) per pair from g and three entries of Hd; applying a swap updates g by two rows of Hd,
// O(K). Swaps preserve every group's count of non-zeros, so the pattern still holds.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>

#include "calib/blas_kernels.h"
#include "calib/method_common.h"
#include "nmkit/calib.h"
#include "nmkit/threads.h"

namespace nmkit {
namespace {

// The damped Hessian of design section 12: checked, dead inputs at 1, damping * mean(diag) added.
Result<std::vector<double>> damped_hessian(const double* H, int64_t K, double damping, std::string_view name) {
  auto checked = calib_detail::checked_hessian(H, K, damping, name);
  if (!checked.ok()) return checked.error();
  std::vector<double> Hd = std::move(checked->h);
  for (int64_t k = 0; k < K; ++k) Hd[k * K + k] += damping * checked->mean_diag;
  return Hd;
}

// G = E Hd (rows x K), Hd symmetric.
void times_hessian(const std::vector<double>& Hd, const std::vector<double>& E, int64_t rows, int64_t K,
                   std::vector<double>& G) {
  cblas_dsymm(CblasRowMajor, CblasRight, CblasUpper, static_cast<int>(rows), static_cast<int>(K), 1.0, Hd.data(),
              static_cast<int>(K), E.data(), static_cast<int>(K), 0.0, G.data(), static_cast<int>(K));
}

struct RowOutcome {
  int64_t swaps = 0;
  int passes = 0;
};

// Swaps in one row until a pass over its groups finds none that lowers f by more than a 1e-9
// fraction (rounding of the incremental g cannot then cycle) or `max_passes` passes ran. v, e, g
// are the row's values, errors and Hd e; each group applies its best swap, then the next group
// sees the updated g.
RowOutcome swap_row(const std::vector<double>& Hd, int64_t K, int group, int max_passes, double* v, double* e,
                    double* g) {
  RowOutcome out;
  double f = 0;
  for (int64_t k = 0; k < K; ++k) f += e[k] * g[k];
  for (int pass = 0; pass < max_passes; ++pass) {
    int64_t applied = 0;
    for (int64_t s = 0; s < K; s += group) {
      const int64_t t = std::min<int64_t>(K, s + group);
      double best = 0, best_a = 0;
      int64_t bi = -1, bj = -1;
      for (int64_t i = s; i < t; ++i) {
        if (v[i] != 0) continue;
        const double hii = Hd[i * K + i];
        for (int64_t j = s; j < t; ++j) {
          if (v[j] == 0) continue;
          const double b = v[j];
          const double c = g[i] + b * Hd[i * K + j];
          const double delta = 2 * b * g[j] + b * b * Hd[j * K + j] - c * c / hii;
          if (delta < best) {
            best = delta;
            best_a = c / hii;
            bi = i;
            bj = j;
          }
        }
      }
      if (bi < 0 || !(best < -1e-9 * f)) continue;
      const double b = v[bj], a = best_a;
      const double* hj = Hd.data() + bj * K;
      const double* hi = Hd.data() + bi * K;
      for (int64_t k = 0; k < K; ++k) g[k] += b * hj[k] - a * hi[k];
      e[bj] += b;
      e[bi] -= a;
      v[bj] = 0;
      v[bi] = a;
      f += best;
      ++applied;
    }
    out.passes = pass + 1;
    out.swaps += applied;
    if (applied == 0) break;
  }
  return out;
}

}  // namespace

Result<SwapResult> swap_in_groups(const TensorView& w, Tensor& pruned, const double* H, Pattern pattern,
                                  const SwapOptions& options, std::string_view name) {
  calib_detail::select_blas_kernels();
  const std::string where = calib_detail::layer_prefix(name);
  if (w.shape.size() != 2 || pruned.shape() != w.shape || !is_prunable(pruned.dtype())) {
    return Error(where + "in-group swaps need the weight and its pruned form of one 2-D shape, got " +
                 shape_str(w.shape) + " and " + shape_str(pruned.shape()));
  }
  if (options.max_passes < 1) {
    return Error(where + "in-group swaps need at least one pass, got " + std::to_string(options.max_passes));
  }
  const int64_t rows = w.rows(), K = w.cols();
  auto original = calib_detail::finite_f32(w, name);
  if (!original.ok()) return original.error();
  auto Hd = damped_hessian(H, K, options.damping, name);
  if (!Hd.ok()) return Hd.error();
  const std::vector<float> start = pruned.to_f32();
  const size_t n = static_cast<size_t>(rows * K);
  std::vector<double> V(start.begin(), start.end()), E(n), G(n);
  for (size_t i = 0; i < n; ++i) E[i] = double((*original)[i]) - V[i];
  SwapResult out;
  times_hessian(*Hd, E, rows, K, G);  // the rows' running g start here
  for (size_t i = 0; i < n; ++i) out.objective_before += E[i] * G[i];

  std::atomic<int64_t> swaps{0};
  std::atomic<int> passes{0};
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, K));
  parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const RowOutcome o = swap_row(*Hd, K, pattern.group, options.max_passes, V.data() + r * K, E.data() + r * K,
                                    G.data() + r * K);
      swaps += o.swaps;
      int seen = passes.load();
      while (o.passes > seen && !passes.compare_exchange_weak(seen, o.passes)) {
      }
    }
  });
  out.swaps = swaps.load();
  out.passes = passes.load();

  std::vector<float> result(n);
  for (size_t i = 0; i < n; ++i) {
    result[i] = static_cast<float>(V[i]);
    if (!std::isfinite(result[i])) {
      return Error(where + "in-group swap overflowed at row " + std::to_string(static_cast<int64_t>(i) / K) +
                   ", column " + std::to_string(static_cast<int64_t>(i) % K));
    }
  }
  convert_from_f32(pruned.dtype(), result.data(), pruned.data(), n);
  const std::vector<float> stored = pruned.to_f32();
  for (size_t i = 0; i < n; ++i) E[i] = double((*original)[i]) - double(stored[i]);
  out.objective_after = calib_detail::quadratic_trace(E, rows, K, Hd->data());
  if (out.objective_after > out.objective_before) {  // rounding to bf16/f16 undid the gain
    convert_from_f32(pruned.dtype(), start.data(), pruned.data(), n);
    out.objective_after = out.objective_before;
    out.reverted = true;
  }
  const std::vector<float> final_values = out.reverted ? start : stored;
  std::vector<uint8_t> kept(n);
  for (size_t i = 0; i < n; ++i) kept[i] = final_values[i] != 0;
  out.sums = calib_detail::kept_sums(*original, kept, rows, K);
  return out;
}

}  // namespace nmkit
