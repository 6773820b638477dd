// Calibrated pruning of one linear layer (docs/design.md section 12): the statistics of its inputs
// over calibration tokens, Wanda (|w| * a[k] through prune()) and SparseGPT (second-order pruning
// with the weight updates of Frantar & Alistarh 2023), and the output error on those inputs.
// The model-level driver that gathers these statistics block by block lives in nmkit/calib_model.h.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "nmkit/metrics.h"
#include "nmkit/pattern.h"
#include "nmkit/prune.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

// Second moments of a linear layer's inputs X [tokens, K] summed over calibration batches, in
// float64: the per-feature sums of squares (Wanda) and, when asked, H = X^T X (SparseGPT, output
// error). Batches are converted to float64 a slab of rows at a time and added with BLAS dsyrk.
class InputStats {
 public:
  explicit InputStats(int64_t K, bool with_hessian);

  // Adds `tokens` rows of X (row-major, K floats each, row stride `ld` >= K; 0 means K).
  void add(const float* X, int64_t tokens, int64_t ld = 0);

  int64_t K() const { return K_; }
  int64_t tokens() const { return tokens_; }
  bool has_hessian() const { return !hessian_.empty(); }
  // a[k] = sqrt(sum over tokens of x_k^2), float64 then float32 (design section 12).
  std::vector<float> act_norms() const;
  // H = X^T X, K x K row-major, both triangles filled (empty without a Hessian).
  std::vector<double> hessian() const;
  // The same H, moved out: the statistics hold no Hessian afterwards (tokens and act_norms stay), so
  // a caller done adding needs no second K x K copy (8B's ffn_down: 1.6 GB).
  std::vector<double> take_hessian();

 private:
  int64_t K_ = 0;
  int64_t tokens_ = 0;
  std::vector<double> sum_sq_;
  std::vector<double> hessian_;  // upper triangle (row-major) accumulated; lower filled on read
  std::vector<double> slab_;     // rows of X converted to float64, sized by the first add
};

// Wanda: prunes w by the score |w| * a[k] with a = stats.act_norms() (design sections 2 and 12).
Result<PruneResult> wanda_prune(const TensorView& w, const std::vector<float>& act_norms,
                                Pattern pattern, std::string_view name = "");

struct SparseGptOptions {
  double damping = 0.01;  // fraction of mean(diag H) added to the diagonal
  int block_size = 128;   // columns per lazy-update block, rounded down to a multiple of the group
};

struct SparseGptResult {
  Tensor pruned;        // dense-masked, dtype and shape of w; kept weights updated
  PruneSums sums;       // section 3 sums of the mask over the ORIGINAL weights (sparsity, kept and
                        // pruned magnitudes); the kept weights moved, see weight_relative_error
  double weight_relative_error = 0;  // ||W - W_pruned||_F / ||W||_F including the updates
  double damping = 0;   // the damping fraction that gave a Cholesky factor (0.01, 0.1 or 1 x it)
  int64_t dead_inputs = 0;  // inputs with H[k,k] = 0: their column of W is set to zero
  double cholesky_seconds = 0;
  double update_seconds = 0;
};

// The upper Cholesky factor U of (H + damping)^-1 (H^-1 = U^T U), as SparseGPT needs it, with the
// dead-input and damping rules of design section 12. H is K x K (only its upper triangle is read);
// `dead` receives the indices of inputs with H[k,k] = 0. Errors name `name` on a non-finite H and
// when the Cholesky factorization fails at all three dampings.
struct InverseCholesky {
  std::vector<double> U;  // K x K row-major, strict lower triangle zero
  std::vector<int64_t> dead;
  double damping = 0;     // the fraction that succeeded
};
Result<InverseCholesky> inverse_cholesky(const double* H, int64_t K, double damping,
                                         std::string_view name = "");

// SparseGPT (docs/design.md section 12) of the 2-D f32/f16/bf16 weight w [rows, K] with the
// Hessian H (K x K, upper triangle read) of its inputs. Any keep:group, tail groups as section 2.
Result<SparseGptResult> sparsegpt_prune(const TensorView& w, const double* H, Pattern pattern,
                                        const SparseGptOptions& options = {},
                                        std::string_view name = "");
// The same with U already computed (layers sharing their inputs share U).
Result<SparseGptResult> sparsegpt_prune_with(const TensorView& w, const InverseCholesky& factor,
                                             Pattern pattern, const SparseGptOptions& options = {},
                                             std::string_view name = "");

// ADMM N:M mask search (docs/design.md 12.1; after Boza, arXiv 2401.02938, and ALPS, arXiv
// 2406.07831) on the objective tr((W - Wp) Hd (W - Wp)^T), Hd = H damped as SparseGPT's. Columns are
// scaled to a unit diagonal (Hn = D^-1 Hd D^-1, Wn = W D, d = sqrt(diag Hd)); with A = Hn + rho I,
// each iteration is Z = P(W + U), U = W + U - Z, W = Wn + rho (Z - U - Wn) A^-1, the projection P
// keeping the pattern's best |W + U| of every group plus, during the schedule, the best of the rest
// of the row. The result is Z D^-1 on the final mask; the least-squares refit (reconstruct_kept)
// is the caller's, as for the other methods.
struct AdmmOptions {
  double damping = 0.01;  // fraction of mean(diag H) added to the diagonal, as SparseGPT's
  double rho = 0.125;       // the first penalty, in units of Hn's unit diagonal
  double rho_growth = 2.0;  // the penalty is multiplied by this every `rho_every` iterations
  int rho_every = 6;        // iterations per penalty level (0: one level)
  int iterations = 24;    // in all
  int schedule = 16;      // iterations over which the row's extra kept weights fall to 0 (cubically)
  bool double_precision = false;  // the iteration's GEMM in float64 (tests against the reference)
  // Tests: project onto this fixed support (rows * K bytes, 1 = kept) instead of the pattern.
  const std::vector<uint8_t>* frozen_mask = nullptr;

  int rho_levels() const;            // ceil(iterations / rho_every), 1 when rho_every is 0
  int rho_level(int iteration) const;
  double rho_at(int level) const;    // rho * rho_growth^level
};

// What ADMM needs of one input's Hessian, shared by the linears that read it: the column scale and,
// per penalty level, A^-1 = (Hn + rho I)^-1 (K x K, both triangles) in float64 and float32.
struct AdmmFactor {
  int64_t K = 0;
  double damping = 0;
  std::vector<double> rho;    // per level
  std::vector<double> scale;  // d[k] = sqrt(Hd[k,k])
  std::vector<int64_t> dead;  // inputs with H[k,k] = 0: their column of W is set to zero
  std::vector<std::vector<double>> a_inverse;
  std::vector<std::vector<float>> a_inverse_f32;
};
Result<AdmmFactor> admm_factor(const double* H, int64_t K, const AdmmOptions& options = {},
                               std::string_view name = "");

struct AdmmResult {
  Tensor pruned;   // dense-masked, dtype and shape of w; kept weights moved
  PruneSums sums;  // section 3 sums of the mask over the original weights
  double weight_relative_error = 0;
  int64_t dead_inputs = 0;
  int64_t last_changes = 0;  // mask elements that changed in the last iteration (0: settled)
  double factor_seconds = 0, iterate_seconds = 0;
};
// ADMM of the 2-D f32/f16/bf16 weight w [rows, K]; H is K x K (upper triangle read). Any
// keep:group, tail groups as section 2.
Result<AdmmResult> admm_prune(const TensorView& w, const double* H, Pattern pattern,
                              const AdmmOptions& options = {}, std::string_view name = "");
Result<AdmmResult> admm_prune_with(const TensorView& w, const AdmmFactor& factor, Pattern pattern,
                                   const AdmmOptions& options = {}, std::string_view name = "");

// Least-squares refit of the kept weights of `pruned` (its non-zeros; the mask is kept) toward w's
// outputs on inputs with Hessian H (K x K, both triangles), damped like SparseGPT's:
// `iterations` steps of Jacobi-preconditioned conjugate gradient over all rows at once. The damped
// objective trace((W - Wp) Hd (W - Wp)^T) never rises (if rounding to the dtype made it rise, the
// input is left as it was and `reverted` is set).
struct ReconstructResult {
  double objective_before = 0, objective_after = 0;
  int iterations = 0;
  bool reverted = false;
};
Result<ReconstructResult> reconstruct_kept(const TensorView& w, Tensor& pruned, const double* H,
                                           int iterations, double damping = 0.01,
                                           std::string_view name = "");

// In-group swaps (docs/design.md 12.3) on `pruned` (its non-zeros are the mask): in each row, a
// kept and a pruned weight of one group trade places, the newly kept one at its best value with
// the rest held, whenever the exact change of the damped objective trace((W - Wp) Hd (W - Wp)^T)
// is negative; each group applies its best swap per pass, passes repeat until none pays (or
// max_passes). Every group's count of non-zeros is unchanged. If rounding to the dtype made the
// objective rise, the input is left as it was and `reverted` is set.
struct SwapOptions {
  double damping = 0.01;  // as SparseGPT's, so that every step sees one objective
  int max_passes = 16;
};
struct SwapResult {
  PruneSums sums;     // section 3 sums of the final mask over the original weights
  int64_t swaps = 0;  // applied
  int passes = 0;     // the most any row ran
  double objective_before = 0, objective_after = 0;
  bool reverted = false;
};
Result<SwapResult> swap_in_groups(const TensorView& w, Tensor& pruned, const double* H, Pattern pattern,
                                  const SwapOptions& options = {}, std::string_view name = "");

// Dense targets (docs/design.md 12.4): the cross statistics of one linear input over the
// calibration tokens, C = X_d^T X_p (K x K, row-major: C[i][j] = sum over tokens of xd_i xp_j),
// X_d the dense model's inputs to the linear and X_p the pruned model's, row t of both one token.
class CrossStats {
 public:
  explicit CrossStats(int64_t K);
  // Adds `tokens` rows of both streams (row-major, K floats each).
  void add(const float* dense, const float* pruned, int64_t tokens);
  int64_t K() const { return K_; }
  int64_t tokens() const { return tokens_; }
  std::vector<double> take();  // C, moved out

 private:
  int64_t K_ = 0;
  int64_t tokens_ = 0;
  std::vector<double> cross_;
  std::vector<double> dense_slab_, pruned_slab_;  // rows converted to float64
};

// The weight that best reproduces, from the pruned model's inputs, targets a fraction `strength` of
// the way from the linear's outputs on those inputs to the dense model's outputs (docs/design.md
// 12.4): with X_t = X_p + strength (X_d - X_p),
//   W' = argmin ||X_p W'^T - X_t W^T||^2 + lambda ||W' - W||^2
//      = W ((1 - strength) H + strength C + lambda I)(H + lambda I)^-1,
// C = X_d^T X_p, H = X_p^T X_p (both triangles), lambda = damping x mean(diag H). Strength 1 is the
// full fit to the dense outputs, 0 leaves W. f32 result of w's shape. Errors name `name` on a
// non-finite C or H and when H + lambda I is not positive definite.
Result<Tensor> retarget_to_dense(const TensorView& w, const double* C, const double* H, int64_t K,
                                 double strength, double damping, std::string_view name = "");

// ||X W^T - X Wp^T||_F / ||X W^T||_F over the inputs whose Hessian is H (K x K, both triangles):
// sqrt(trace(D H D^T) / trace(W H W^T)) with D = W - Wp. 0 when X W^T is zero.
Result<double> output_error(const TensorView& w, const TensorView& pruned, const double* H);

}  // namespace nmkit
