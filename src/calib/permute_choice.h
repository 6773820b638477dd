// Choosing a block's free permutations (docs/design.md 12.2) from the weights of the matrices that
// read the permuted channels (ffn_down, attn_output) and the statistics of their inputs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nmkit/calib.h"
#include "nmkit/calib_model.h"
#include "nmkit/permute.h"

namespace nmkit::calib_detail {

// The importance the method's mask ranks by, per weight of w (f32 [rows, K]): magnitude |w|, Wanda
// |w| * a[k] (a from `stats`), SparseGPT and ADMM w^2 / [Hd^-1]_kk (Hd: the Hessian of `stats` with
// section 12's dead-input rule and damping; a dead input's weights score 0).
Result<std::vector<float>> consumer_scores(const TensorView& w, CalibMethod method, const InputStats* stats,
                                           double damping, std::string_view name);

// Block b's permutation: the ffn order from ffn_down (when `down` is set), the value order from
// attn_output (when `output` is set), each consumer's search reported in `report`. The stats are
// those of the consumer's input (null for magnitude, which needs none).
struct ConsumerStats {
  bool selected = false;
  const InputStats* stats = nullptr;
};
Result<BlockPermutation> choose_block_permutation(const LlamaModel& model, int64_t b, const CalibOptions& options,
                                                  ConsumerStats down, ConsumerStats output,
                                                  std::vector<PermutationReport>& report);

// The order of block b's input channels shared by `names` (attn_q/k/v or ffn_gate/up; design 12.2 (c),
// a measurement): the selected linears' scores stacked by rows, searched as one matrix. The search
// is reported under the first selected name.
Result<ChannelOrder> choose_input_order(const LlamaModel& model, int64_t b, const CalibOptions& options,
                                        const std::vector<std::string>& names, const InputStats* stats,
                                        const std::function<bool(const std::string&)>& selected,
                                        std::vector<PermutationReport>& report);

}  // namespace nmkit::calib_detail
