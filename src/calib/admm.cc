// ADMM N:M mask search (docs/design.md 12.1); the scalar definition it is tested against is
// src/ref/admm_ref.cc.
//
// The W step, W = (B + rho (Z - U)) A^-1 with B = Wn Hn, is rewritten with Hn A^-1 = I - rho A^-1
// as W = Wn + rho (Z - U - Wn) A^-1: one GEMM per iteration against the explicit A^-1 (shared by
// the linears reading one input), and no B. The projection runs row by row on the pool; the GEMM
// on OpenBLAS, in float32 unless options.double_precision (the iteration only has to find the mask;
// the refit that follows solves for the weights in float64).
#include <cblas.h>
#include <dnnl.h>
#include <lapacke.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "calib/admm_projection.h"
#include "calib/blas_kernels.h"
#include "calib/method_common.h"
#include "calib/single_blas_thread.h"
#include "core/stopwatch.h"
#include "nmkit/calib.h"
#include "nmkit/threads.h"

namespace nmkit {
namespace {

using Clock = std::chrono::steady_clock;
using calib_detail::layer_prefix;
using calib_detail::num;

// dst (rows x K) += alpha * a (rows x K) * s (K x K, both triangles held). Float32 on oneDNN's
// sgemm, which ran this product (576 x 1536 x 1536) 3-4x faster than OpenBLAS's on this machine
// (data.md, "ADMM"); float64 (tests) on OpenBLAS.
void add_product(int64_t rows, int64_t K, double alpha, const float* a, const float* s, float* dst) {
  const dnnl_status_t status = dnnl_sgemm('N', 'N', rows, K, K, static_cast<float>(alpha), a, K, s, K, 1.0f, dst, K);
  NMKIT_ASSERT(status == dnnl_success);
}
void add_product(int64_t rows, int64_t K, double alpha, const double* a, const double* s, double* dst) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(K),
              static_cast<int>(K), alpha, a, static_cast<int>(K), s, static_cast<int>(K), 1.0, dst,
              static_cast<int>(K));
}

template <class T>
struct Iterate {
  int64_t rows = 0, K = 0;
  std::vector<T> wn, w, u, z, v;  // [rows, K] each
  std::vector<uint8_t> kept, previous;
};

template <class T>
Result<AdmmResult> run(const TensorView& w, const std::vector<float>& original, const AdmmFactor& factor,
                       Pattern pattern, const AdmmOptions& options, std::string_view name) {
  const auto t0 = Clock::now();
  const int64_t rows = w.rows(), K = w.cols();
  const size_t n = static_cast<size_t>(rows * K);
  auto a_inverse = [&factor](int level) -> const T* {
    if constexpr (sizeof(T) == sizeof(float)) {
      return factor.a_inverse_f32[level].data();
    } else {
      return factor.a_inverse[level].data();
    }
  };
  Iterate<T> it;
  it.rows = rows;
  it.K = K;
  it.wn.resize(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) it.wn[r * K + k] = static_cast<T>(double(original[r * K + k]) * factor.scale[k]);
  }
  for (int64_t k : factor.dead) {
    for (int64_t r = 0; r < rows; ++r) it.wn[r * K + k] = 0;
  }
  it.w = it.wn;
  it.u.assign(n, T(0));
  it.z.resize(n);
  it.v.resize(n);
  it.kept.assign(n, 0);
  it.previous.assign(n, 0);
  const calib_detail::AdmmSchedule schedule(pattern, K, options.iterations, options.schedule);
  AdmmResult out;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, K));
  for (int t = 0; t < options.iterations; ++t) {
    const int64_t extras = schedule.extras(t);
    it.previous.swap(it.kept);
    // Z = P(W + U); U = W + U - Z; V = Z - U - Wn.
    parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
      std::vector<T> x(static_cast<size_t>(K));
      calib_detail::ProjectionScratch scratch;
      for (int64_t r = r0; r < r1; ++r) {
        const size_t row = static_cast<size_t>(r * K);
        for (int64_t k = 0; k < K; ++k) x[k] = it.w[row + k] + it.u[row + k];
        uint8_t* kept = it.kept.data() + row;
        if (options.frozen_mask != nullptr) {
          std::copy_n(options.frozen_mask->data() + row, K, kept);
        } else {
          calib_detail::project_row(x.data(), original.data() + row, K, pattern, extras, scratch, kept);
        }
        for (int64_t k = 0; k < K; ++k) {
          const T z = kept[k] ? x[k] : T(0);
          it.z[row + k] = z;
          it.u[row + k] = x[k] - z;
          it.v[row + k] = z - it.u[row + k] - it.wn[row + k];
        }
      }
    });
    if (t + 1 == options.iterations) break;  // the result is this Z; no W step after it
    const int level = options.rho_level(t);
    if (t > 0 && level != options.rho_level(t - 1)) {
      // U is the scaled dual (Y / rho): a new rho rescales it, and V with it.
      const T c = static_cast<T>(factor.rho[level - 1] / factor.rho[level]);
      for (size_t i = 0; i < n; ++i) {
        const T u = it.u[i] * c;
        it.v[i] += it.u[i] - u;
        it.u[i] = u;
      }
    }
    std::copy(it.wn.begin(), it.wn.end(), it.w.begin());
    if (rows > 0 && K > 0) add_product(rows, K, factor.rho[level], it.v.data(), a_inverse(level), it.w.data());
  }
  for (size_t i = 0; i < n; ++i) out.last_changes += it.kept[i] != it.previous[i];
  std::vector<double> values(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) values[r * K + k] = double(it.z[r * K + k]) / factor.scale[k];
  }
  auto moved = calib_detail::moved_weights(w, original, values, it.kept, "ADMM", name);
  if (!moved.ok()) return moved.error();
  out.pruned = std::move(moved->pruned);
  out.sums = moved->sums;
  out.weight_relative_error = moved->weight_relative_error;
  out.dead_inputs = static_cast<int64_t>(factor.dead.size());
  out.iterate_seconds = seconds_since(t0);
  return out;
}

}  // namespace

int AdmmOptions::rho_levels() const {
  return rho_every <= 0 ? 1 : std::max(1, (iterations + rho_every - 1) / rho_every);
}
int AdmmOptions::rho_level(int iteration) const {
  return rho_every <= 0 ? 0 : std::min(iteration / rho_every, rho_levels() - 1);
}
double AdmmOptions::rho_at(int level) const { return rho * std::pow(rho_growth, level); }

Result<AdmmFactor> admm_factor(const double* H, int64_t K, const AdmmOptions& options, std::string_view name) {
  calib_detail::select_blas_kernels();
  if (!(options.rho > 0) || !std::isfinite(options.rho) || !(options.rho_growth > 0) ||
      !std::isfinite(options.rho_growth)) {
    return Error(layer_prefix(name) + "ADMM's rho must be finite and > 0, got " + num(options.rho) +
                 " (growth " + num(options.rho_growth) + ")");
  }
  auto checked = calib_detail::checked_hessian(H, K, options.damping, name);
  if (!checked.ok()) return checked.error();
  AdmmFactor out;
  out.K = K;
  out.damping = options.damping;
  out.dead = checked->dead;
  out.scale.resize(static_cast<size_t>(K));
  std::vector<double>& hn = checked->h;
  for (int64_t k = 0; k < K; ++k) {
    hn[k * K + k] += options.damping * checked->mean_diag;
    out.scale[k] = std::sqrt(hn[k * K + k]);
  }
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < K; ++j) hn[i * K + j] /= out.scale[i] * out.scale[j];
  }
  // One level per pool thread, each factorization on one OpenBLAS thread (single_blas_thread.h).
  const int levels = options.rho_levels();
  out.rho.resize(static_cast<size_t>(levels));
  out.a_inverse.resize(static_cast<size_t>(levels));
  out.a_inverse_f32.resize(static_cast<size_t>(levels));
  std::vector<lapack_int> info(static_cast<size_t>(levels), 0);
  const calib_detail::SingleBlasThread single;
  parallel_for(levels, 1, [&](int64_t l0, int64_t l1) {
    for (int64_t level = l0; level < l1; ++level) {
      const double rho = options.rho_at(static_cast<int>(level));
      std::vector<double> a = hn;  // A = Hn + rho I
      for (int64_t i = 0; i < K; ++i) a[i * K + i] += rho;
      if (K > 0) {
        // Row-major upper = column-major lower (inverse_cholesky.cc): A^-1 lands in the upper triangle.
        const auto k = static_cast<lapack_int>(K);
        info[level] = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', k, a.data(), k);
        if (info[level] == 0) info[level] = LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', k, a.data(), k);
        if (info[level] != 0) continue;
      }
      for (int64_t i = 0; i < K; ++i) {
        for (int64_t j = 0; j < i; ++j) a[i * K + j] = a[j * K + i];
      }
      out.rho[level] = rho;
      out.a_inverse_f32[level].assign(a.begin(), a.end());
      out.a_inverse[level] = std::move(a);
    }
  });
  for (int level = 0; level < levels; ++level) {
    if (info[level] != 0) {
      return Error(layer_prefix(name) + "ADMM: Cholesky factorization of Hn + rho I failed at rho " +
                   num(options.rho_at(level)) + " (LAPACK info " + std::to_string(info[level]) + ")");
    }
  }
  return out;
}

Result<AdmmResult> admm_prune(const TensorView& w, const double* H, Pattern pattern, const AdmmOptions& options,
                              std::string_view name) {
  if (w.shape.size() != 2) {
    return Error(layer_prefix(name) + "ADMM needs a 2-D weight [rows, K], got shape " + shape_str(w.shape));
  }
  const auto t0 = Clock::now();
  auto factor = admm_factor(H, w.cols(), options, name);
  if (!factor.ok()) return factor.error();
  const double seconds = seconds_since(t0);
  auto result = admm_prune_with(w, *factor, pattern, options, name);
  if (result.ok()) result->factor_seconds = seconds;
  return result;
}

Result<AdmmResult> admm_prune_with(const TensorView& w, const AdmmFactor& factor, Pattern pattern,
                                   const AdmmOptions& options, std::string_view name) {
  calib_detail::select_blas_kernels();
  const std::string where = layer_prefix(name);
  if (w.shape.size() != 2) {
    return Error(where + "ADMM needs a 2-D weight [rows, K], got shape " + shape_str(w.shape));
  }
  if (!is_prunable(w.dtype)) {
    return Error(where + "weight has dtype " + std::string(dtype_name(w.dtype)) + ", expected F32, F16 or BF16");
  }
  if (auto checked = Pattern::make(pattern.keep, pattern.group); !checked.ok()) {
    return checked.error().with_context(where);
  }
  if (options.iterations < 1 || options.schedule < 0) {
    return Error(where + "ADMM needs iterations >= 1 and a schedule >= 0, got " +
                 std::to_string(options.iterations) + " and " + std::to_string(options.schedule));
  }
  if (factor.K != w.cols() || static_cast<int>(factor.a_inverse.size()) != options.rho_levels()) {
    return Error(where + "the ADMM factor is for " + std::to_string(factor.K) + " inputs and " +
                 std::to_string(factor.a_inverse.size()) + " penalty levels, the weight " + shape_str(w.shape) +
                 " has K = " + std::to_string(w.cols()) + " and the options " + std::to_string(options.rho_levels()));
  }
  if (options.frozen_mask != nullptr && options.frozen_mask->size() != static_cast<size_t>(w.numel())) {
    return Error(where + "the frozen mask has " + std::to_string(options.frozen_mask->size()) +
                 " elements, the weight " + std::to_string(w.numel()));
  }
  auto finite = calib_detail::finite_f32(w, name);
  if (!finite.ok()) return finite.error();
  if (options.double_precision) return run<double>(w, *finite, factor, pattern, options, name);
  return run<float>(w, *finite, factor, pattern, options, name);
}

}  // namespace nmkit
