// SparseGPT (Frantar & Alistarh 2023; reference sparsegpt.py), exactly as docs/design.md section 12
// states it, for any keep:group with section 2's tail and tie rules.
//
// Rows are independent given U: row r's updates W[r, k:] -= e[r] * U[k, k:] only touch row r, and its
// mask only looks at row r. So the work inside a block of columns runs row by row on the pool
// (each row's block segment and the block's U stay in cache), and the lazy update of the columns
// after the block is one GEMM, W[:, later] -= E * U[block, later], on OpenBLAS.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "calib/blas_kernels.h"
#include "nmkit/calib.h"
#include "nmkit/threads.h"
#include "calib/method_common.h"
#include "core/stopwatch.h"
#include "prune/select.h"

namespace nmkit {
namespace {

using calib_detail::layer_prefix;

using Clock = std::chrono::steady_clock;

// The score of design section 12, w^2 / U[k,k]^2, is ordered like |w| / U[k,k]; nmkit computes it
// in float32 as fabsf(w) * s[k] with s[k] = float(1 / U[k,k]), one rounding per operation as
// section 2 scores are. With H = cI, s is constant, so the order is |w|'s: exactly the magnitude
// mask. With a diagonal H and no damping, 1 / U[k,k] = sqrt(H[k,k]) up to float64 rounding, so s
// is Wanda's a[k] = float(sqrt(H[k,k])): exactly the Wanda mask (the tie rule is the same).
// Returns the mask of the n <= 64 elements at w (bit j: element j kept).
uint64_t select_group_mask(const double* w, const float* s, int n, int keep) {
  uint64_t key[64];
  for (int j = 0; j < n; ++j) {
    const float wf = static_cast<float>(w[j]);
    const float score = std::fabs(wf) * s[j];
    key[j] = prune_detail::composite_key(prune_detail::score_key(score), prune_detail::abs_key(wf));
  }
  return prune_detail::select_group(key, n, keep);
}

struct Work {
  int64_t rows = 0, K = 0;
  Pattern pattern;
  const double* U = nullptr;
  std::vector<float> scale;   // s[k] = float(1 / U[k,k])
  std::vector<double> W;      // [rows, K] working weights, updated in place
  std::vector<double> E;      // [rows, block] scaled errors of the current block
  std::vector<uint8_t> kept;  // [rows, K] 1 = kept by the mask
};

// Columns [b0, b1) of rows [r0, r1): the sequential part of one block.
void run_block_rows(Work& work, int64_t b0, int64_t b1, int64_t block, int64_t r0, int64_t r1) {
  const int64_t K = work.K;
  const int group = work.pattern.group;
  for (int64_t r = r0; r < r1; ++r) {
    double* w = work.W.data() + r * K;
    uint8_t* kept = work.kept.data() + r * K;
    double* e_row = work.E.data() + r * block;
    for (int64_t i = b0; i < b1; ++i) {
      if (i % group == 0) {  // the first column of a group: choose its mask on current weights
        const int n = static_cast<int>(std::min<int64_t>(group, K - i));
        const uint64_t mask = select_group_mask(w + i, work.scale.data() + i, n, work.pattern.keep);
        for (int j = 0; j < n; ++j) kept[i + j] = static_cast<uint8_t>((mask >> j) & 1u);
      }
      const double* u = work.U + i * K;
      if (kept[i]) {
        e_row[i - b0] = 0;  // q = w: no error, nothing to propagate
        continue;
      }
      const double e = w[i] / u[i];
      w[i] = 0;  // +0: q of a pruned element
      e_row[i - b0] = e;
      for (int64_t j = i + 1; j < b1; ++j) w[j] -= e * u[j];
    }
  }
}

}  // namespace

Result<SparseGptResult> sparsegpt_prune(const TensorView& w, const double* H, Pattern pattern,
                                        const SparseGptOptions& options, std::string_view name) {
  if (w.shape.size() != 2) {
    return Error(layer_prefix(name) + "SparseGPT needs a 2-D weight [rows, K], got shape " +
                 shape_str(w.shape));
  }
  const auto t0 = Clock::now();
  auto factor = inverse_cholesky(H, w.cols(), options.damping, name);
  if (!factor.ok()) return factor.error();
  const double chol = seconds_since(t0);
  auto result = sparsegpt_prune_with(w, *factor, pattern, options, name);
  if (result.ok()) result->cholesky_seconds = chol;
  return result;
}

Result<SparseGptResult> sparsegpt_prune_with(const TensorView& w, const InverseCholesky& factor,
                                             Pattern pattern, const SparseGptOptions& options,
                                             std::string_view name) {
  calib_detail::select_blas_kernels();
  if (w.shape.size() != 2) {
    return Error(layer_prefix(name) + "SparseGPT needs a 2-D weight [rows, K], got shape " +
                 shape_str(w.shape));
  }
  if (!is_prunable(w.dtype)) {
    return Error(layer_prefix(name) + "weight has dtype " + std::string(dtype_name(w.dtype)) +
                 ", expected F32, F16 or BF16");
  }
  if (auto checked = Pattern::make(pattern.keep, pattern.group); !checked.ok()) {
    return checked.error().with_context(layer_prefix(name));
  }
  const int64_t rows = w.rows(), K = w.cols();
  if (static_cast<int64_t>(factor.U.size()) != K * K) {
    return Error(layer_prefix(name) + "the Hessian factor is for " +
                 std::to_string(static_cast<int64_t>(std::sqrt(double(factor.U.size())))) +
                 " inputs, the weight " + shape_str(w.shape) + " has K = " + std::to_string(K));
  }
  if (options.block_size < 1) {
    return Error(layer_prefix(name) + "block size must be >= 1, got " + std::to_string(options.block_size));
  }
  const auto t0 = Clock::now();
  auto finite = calib_detail::finite_f32(w, name);
  if (!finite.ok()) return finite.error();
  const std::vector<float>& original = *finite;

  Work work;
  work.rows = rows;
  work.K = K;
  work.pattern = pattern;
  work.U = factor.U.data();
  work.scale.resize(K);
  for (int64_t k = 0; k < K; ++k) work.scale[k] = static_cast<float>(1.0 / factor.U[k * K + k]);
  work.W.assign(original.begin(), original.end());
  for (int64_t k : factor.dead) {
    for (int64_t r = 0; r < rows; ++r) work.W[r * K + k] = 0;
  }
  // Blocks of whole groups, so a group never straddles the lazy update (design section 12).
  const int64_t block = std::max<int64_t>(pattern.group, options.block_size / pattern.group * pattern.group);
  work.E.resize(static_cast<size_t>(rows * block));
  work.kept.resize(static_cast<size_t>(rows * K));

  // ~64K multiply-adds of in-block work per grain.
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, block * block / 2));
  for (int64_t b0 = 0; b0 < K; b0 += block) {
    const int64_t b1 = std::min(K, b0 + block);
    parallel_for(rows, grain, [&work, b0, b1, block](int64_t r0, int64_t r1) {
      run_block_rows(work, b0, b1, block, r0, r1);
    });
    if (b1 < K && rows > 0) {
      // W[:, b1:] -= E[:, 0:b1-b0] * U[b0:b1, b1:]
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows),
                  static_cast<int>(K - b1), static_cast<int>(b1 - b0), -1.0, work.E.data(),
                  static_cast<int>(block), work.U + b0 * K + b1, static_cast<int>(K), 1.0,
                  work.W.data() + b1, static_cast<int>(K));
    }
  }

  SparseGptResult out;
  out.damping = factor.damping;
  out.dead_inputs = static_cast<int64_t>(factor.dead.size());
  auto moved = calib_detail::moved_weights(w, original, work.W, work.kept, "SparseGPT", name);
  if (!moved.ok()) return moved.error();
  out.pruned = std::move(moved->pruned);
  out.sums = moved->sums;
  out.weight_relative_error = moved->weight_relative_error;
  out.update_seconds = seconds_since(t0);
  return out;
}

}  // namespace nmkit
