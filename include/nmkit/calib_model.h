// Calibrated pruning of a whole llama model, block by block (docs/design.md section 12): the inputs
// of block b are the outputs of blocks 0..b-1 already pruned; one pass of block b gathers the
// statistics of all its linears, they are pruned, and the block runs again, pruned, to give block
// b+1 its inputs. Memory: one block's hidden states (twice) plus the statistics of its four inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/calib.h"
#include "nmkit/metrics.h"
#include "nmkit/model.h"
#include "nmkit/pattern.h"
#include "nmkit/permute.h"
#include "nmkit/status.h"

namespace nmkit {

// The storage form of a model's block linears (nmkit/model.h's enum, named through ModelOptions).
using CalibLinearFormat = decltype(ModelOptions::format);

enum class CalibMethod { Magnitude, Wanda, SparseGpt, Admm };
Result<CalibMethod> parse_calib_method(std::string_view text);  // "magnitude" | "wanda" | "sparsegpt" | "admm"
std::string_view calib_method_name(CalibMethod method);
bool needs_calibration(CalibMethod method);  // wanda, sparsegpt and admm
// Whether pruning runs calibration passes: every method but magnitude, and magnitude followed by a
// refit, in-group swaps or dense targets (all need the inputs' Hessian).
bool needs_calibration_passes(CalibMethod method, int refit_steps, bool swaps, bool dense_targets = false);

// n_seq sequences of seq_len tokens from a tokenized calibration text: windows spread evenly over
// the text (window i starts at i * floor(n_tokens / n_seq)), so they sample all of it. Fewer than
// n_seq * seq_len tokens: as many whole sequences as fit; fewer than seq_len: an Error naming
// `what` and both counts.
Result<std::vector<int32_t>> calibration_sequences(const std::vector<int32_t>& tokens, int64_t n_seq,
                                                   int64_t seq_len, std::string_view what);

struct CalibOptions {
  Pattern pattern;
  CalibMethod method = CalibMethod::SparseGpt;
  SparseGptOptions sparsegpt;
  AdmmOptions admm;  // its damping is sparsegpt.damping, so that the refit and the error see one H
  // The format pruned linears are stored in inside the model (dense to keep the f32 weights only).
  CalibLinearFormat format = CalibLinearFormat::Dense;
  // Wanda needs no Hessian; its output error (docs/design.md section 12) is measured on a Hessian of the first
  // `wanda_error_tokens` calibration tokens (0: none) so that it stays cheap.
  int64_t wanda_error_tokens = 2048;
  // The per-linear output error (design section 12) is computed only when this is set: for
  // SparseGPT and ADMM it costs one product with H per linear, for Wanda a Hessian as well.
  bool output_error = true;
  // Beyond the papers: after the mask, refit the kept weights by least squares on the calibration
  // inputs (reconstruct_kept, this many CG steps; 0: off). Needs the full Hessian, also for Wanda.
  int refit_steps = 0;
  // In-group swaps (docs/design.md 12.3, swap_in_groups) after the mask and before the refit: a kept
  // and a pruned weight of one group trade places while the exact change of the output error says
  // so. Needs the full Hessian, also for Wanda and magnitude.
  bool swaps = false;
  // Which block linears to prune, by GGUF name (blk.B.attn_q.weight); unset: all of them. The
  // others stay as they are (and are not in the report). Needs format Dense.
  std::function<bool(std::string_view name)> selected;
  // Free channel permutations (docs/design.md 12.2): before a block is pruned, its feed-forward
  // channels and each kv group's value channels are reordered so that the masks of ffn_down and
  // attn_output keep the most importance (by the method's own score); the block computes the same
  // function. Only a selected consumer (ffn_down, attn_output) is permuted for.
  bool permute = false;
  // A measurement of design 12.2 (c), not a form: also reorder the inputs of q/k/v and of gate/up per
  // block (one order per input, searched on the readers' stacked scores), prune in that order and
  // put the columns back, so the model computes with the masks (c) would give; the masks are then
  // N:M only in the searched order, so this needs format Dense and no on_pruned writer.
  bool permute_inputs = false;
  // Dense targets (docs/design.md 12.4): when > 0 (at most 1), the dense model's hidden states run
  // beside the pruned ones and each linear is first moved to the weight whose outputs on the pruned
  // model's inputs go this fraction of the way to the dense model's outputs (retarget_to_dense, damped
  // as SparseGPT), then pruned. Costs a second pass of every block and a K x K cross statistic per
  // input. Needs calibration passes.
  double dense_targets = 0;
  // Called when block b (of n_layer) is done.
  std::function<void(int64_t b, int64_t n_layer)> on_block;
  // Where each block's pruned weights go as soon as the block is done: its 7 linears, f32
  // dense-masked, under their GGUF names, in block_linear_names() order, then, when `permute` moved
  // the value channels of a family with a v bias, that bias (blk.B.attn_v.bias) (a writer that streams the
  // model out block by block, so no more than a block of pruned weights is ever held). The model
  // itself is repacked in `format` either way; it keeps them too only if built with
  // keep_dense_weights.
  std::function<Status(int64_t b, std::vector<NamedTensor> pruned)> on_pruned;
};

struct LinearReport {
  int64_t block = 0;
  std::string name;          // GGUF name: blk.B.attn_q.weight
  PruneSums sums;            // section 3, of the mask over the original weight
  double weight_relative_error = 0;  // ||W - Wp||_F / ||W||_F (SparseGPT moves kept weights)
  std::optional<double> output_error;  // ||XW^T - XWp^T||_F / ||XW^T||_F on calibration inputs
  int64_t error_tokens = 0;  // tokens the output error was measured on
  std::optional<double> refit_before;  // output error before the refit (refit_steps > 0)
  int64_t swaps = 0;         // in-group swaps applied (CalibOptions::swaps)
  double seconds = 0;        // pruning (and its share of the Cholesky), not the forward passes
  double damping = 0;        // SparseGPT and ADMM only
  int64_t dead_inputs = 0;
};

// What a permutation (docs/design.md 12.2) gained for one consumer of a block: the importance its
// mask keeps (the method's score, summed; attn_output: over its kv groups) in the original order and
// in the chosen one.
struct PermutationReport {
  int64_t block = 0;
  std::string name;  // blk.B.ffn_down.weight or blk.B.attn_output.weight
  double identity_kept = 0, kept = 0;
  int steps = 0;     // assignment steps that improved
  ChannelOrder order;  // ffn_down: the ffn order; attn_output: the value order (BlockPermutation)
};

struct CalibTimes {  // seconds
  double forward = 0;   // embedding and block passes (statistics and pruned)
  double stats = 0;     // Hessian and norm accumulation in the hooks
  double cholesky = 0;  // SparseGPT's factor, ADMM's A^-1
  double prune = 0;     // SparseGPT updates / ADMM iterations / Wanda and magnitude selection, and metrics
  double refit = 0;     // least-squares refit of the kept weights
  double swap = 0;      // in-group swaps
  double error = 0;     // output errors
  double pack = 0;      // replacing the model's linears
  double permute = 0;   // choosing and applying the free permutations
  double retarget = 0;  // dense targets: the retargeted weights (12.4)
  double total = 0;
};

struct CalibReport {
  std::vector<LinearReport> linears;
  std::vector<PermutationReport> permutations;  // CalibOptions::permute: per block, down then output
  CalibTimes seconds;
  int64_t n_seq = 0, seq_len = 0;
  int refit_steps = 0;
  bool swaps = false;
  double dense_targets = 0;
};

// Calibrated pruning one block at a time: each next_block() gathers block b's statistics from one
// pass of it, prunes its linears (dense weights read from the model: LlamaModel::load_dense_weight),
// repacks them in the model and runs the pruned block for the next one's inputs. A caller that
// writes the model as it goes pulls blocks as its output needs them. `tokens` holds n_seq * seq_len
// calibration tokens (ignored by magnitude, which needs none and runs no pass); the model must
// outlive the calibrator.
class ModelCalibrator {
 public:
  static Result<ModelCalibrator> start(LlamaModel& model, std::vector<int32_t> tokens, int64_t n_seq,
                                       int64_t seq_len, CalibOptions options);
  ModelCalibrator(ModelCalibrator&&) noexcept;
  ModelCalibrator& operator=(ModelCalibrator&&) noexcept;
  ~ModelCalibrator();

  int64_t blocks_done() const;
  bool done() const;
  Status next_block();  // an Error once done
  // The report, linears in the model's order (complete once done()).
  CalibReport report() const;

 private:
  struct State;
  explicit ModelCalibrator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Prunes every block linear of `model` in place (ModelCalibrator to the end).
Result<CalibReport> calibrate_and_prune(LlamaModel& model, const std::vector<int32_t>& tokens,
                                        int64_t n_seq, int64_t seq_len, const CalibOptions& options);

}  // namespace nmkit
