// Free channel permutations of a llama block (docs/design.md 12.2): the model computes the same
// function, but the N:M groups of the matrices that read the permuted channels (ffn_down, attn_output)
// hold other columns, so their masks can keep more of what matters.
#pragma once

#include <cstdint>
#include <vector>

#include "nmkit/model.h"
#include "nmkit/pattern.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

// A permutation of K columns: new column j holds old column perm[j].
using ChannelOrder = std::vector<int32_t>;

// The importance an N:M mask keeps: for every row of `scores` ([rows, K] row-major, >= 0) and every
// group of `pattern.group` columns of the order `perm` (identity when empty), the sum of its
// `pattern.keep` largest scores; summed in float64. K must be whole groups.
double kept_importance(const float* scores, int64_t rows, int64_t K, Pattern pattern, const ChannelOrder& perm = {});

// The assignment of n rows to n columns that maximises sum gain[i * n + assign[i]] (float64, any
// sign): the linear sum assignment problem, solved exactly (shortest augmenting paths, O(n^3)).
std::vector<int32_t> max_assignment(const std::vector<double>& gain, int64_t n);

struct ChannelSearch {
  ChannelOrder perm;         // the order chosen (identity when nothing beats it)
  double identity_kept = 0;  // kept_importance of the identity
  double kept = 0;           // kept_importance of perm (>= identity_kept)
  int steps = 0;             // assignment steps that improved
};

// The column order of `scores` [rows, K] whose N:M groups keep the most importance (docs/design.md
// 12.2): starting from the better of the identity and a round-robin deal of the columns by total
// score, it reassigns the columns at one position of every group at a time by an exact assignment
// problem, until a sweep over the positions gains nothing. K not whole groups, one group, or
// keep >= group: the identity.
ChannelSearch search_channel_order(const float* scores, int64_t rows, int64_t K, Pattern pattern);

// What a block's free permutations move (docs/design.md 12.2). Empty members are the identity.
struct BlockPermutation {
  ChannelOrder ffn;    // n_ff: rows of ffn_gate and ffn_up, columns of ffn_down
  ChannelOrder value;  // n_head_kv * head_dim: rows of attn_v (and its bias); a permutation within
                       // each kv head, so attn_output's columns follow (output_columns)
  bool identity() const { return ffn.empty() && value.empty(); }
};

// attn_output's column order for a value order: query head h reads kv head h / (n_head / n_head_kv).
ChannelOrder output_columns(const LlamaParams& p, const ChannelOrder& value);

// w [rows, K] as f32 with its rows (columns) in `perm`'s order: new row i = old row perm[i].
Tensor permute_rows(const TensorView& w, const ChannelOrder& perm);
Tensor permute_columns(const TensorView& w, const ChannelOrder& perm);
// H (K x K row-major, symmetric) of the permuted inputs: H'[i][j] = H[perm[i]][perm[j]].
std::vector<double> permute_symmetric(std::vector<double> H, int64_t K, const ChannelOrder& perm);

// Block b's linear `name` (block_linear_names()) under the permutation: gate/up/v rows, down/o
// columns, q/k unchanged.
Tensor permute_block_linear(const LlamaParams& p, const BlockPermutation& perm, std::string_view name,
                            Tensor w);

// An Error when the model's family holds a vector the permutation would have to move and cannot
// (any attn_v vector but the bias; docs/design.md 12.2), or a consumer's K is not the shape expected.
Status check_permutable(const LlamaParams& p);

// Applies `perm` to block b of `model` as it stands (its dense weights, repacked dense; the v bias
// when the family has one): the model computes the same function.
Status permute_block(LlamaModel& model, int64_t b, const BlockPermutation& perm);

}  // namespace nmkit
