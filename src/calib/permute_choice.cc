// Choosing a block's free permutations (docs/design.md 12.2); see calib/permute_choice.h.
#include "calib/permute_choice.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace nmkit::calib_detail {

Result<std::vector<float>> consumer_scores(const TensorView& w, CalibMethod method, const InputStats* stats,
                                           double damping, std::string_view name) {
  const int64_t rows = w.shape[0], K = w.shape[1];
  const float* v = w.as<float>();
  std::vector<float> s(static_cast<size_t>(rows * K));
  std::vector<float> column(static_cast<size_t>(K), 1.0f);  // the factor of |w| (or of w^2)
  const bool squared = method == CalibMethod::SparseGpt || method == CalibMethod::Admm;
  if (method == CalibMethod::Wanda) {
    column = stats->act_norms();
  } else if (squared) {
    const std::vector<double> H = stats->hessian();
    auto factor = inverse_cholesky(H.data(), K, damping, name);
    if (!factor.ok()) return factor.error();
    // [Hd^-1]_kk = sum over i of U[i][k]^2 (Hd^-1 = U^T U).
    std::vector<double> diag(static_cast<size_t>(K), 0.0);
    for (int64_t i = 0; i < K; ++i) {
      for (int64_t k = i; k < K; ++k) diag[static_cast<size_t>(k)] += factor->U[i * K + k] * factor->U[i * K + k];
    }
    for (int64_t k = 0; k < K; ++k) column[static_cast<size_t>(k)] = static_cast<float>(1.0 / diag[static_cast<size_t>(k)]);
    for (int64_t k : factor->dead) column[static_cast<size_t>(k)] = 0.0f;
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      const float x = v[r * K + k];
      s[static_cast<size_t>(r * K + k)] = (squared ? x * x : std::fabs(x)) * column[static_cast<size_t>(k)];
    }
  }
  return s;
}

namespace {

std::string tensor_name(int64_t b, std::string_view linear) {
  return "blk." + std::to_string(b) + "." + std::string(linear) + ".weight";
}

// The method's scores of block b's consumer `linear` (ffn_down or attn_output), read from the file.
Result<std::vector<float>> scores_of(const LlamaModel& model, int64_t b, std::string_view linear,
                                     const CalibOptions& options, const InputStats* stats) {
  auto w = model.load_dense_weight(b, std::string(linear));
  if (!w.ok()) return w.error();
  return consumer_scores(w->view(), options.method, stats, options.sparsegpt.damping, tensor_name(b, linear));
}

}  // namespace

Result<BlockPermutation> choose_block_permutation(const LlamaModel& model, int64_t b, const CalibOptions& options,
                                                  ConsumerStats down, ConsumerStats output,
                                                  std::vector<PermutationReport>& report) {
  const LlamaParams& p = model.params();
  BlockPermutation perm;
  if (down.selected) {
    const std::string name = tensor_name(b, "ffn_down");
    auto s = scores_of(model, b, "ffn_down", options, down.stats);
    if (!s.ok()) return s.error();
    ChannelSearch found = search_channel_order(s->data(), p.n_embd, p.n_ff, options.pattern);
    perm.ffn = std::move(found.perm);
    report.push_back({b, name, found.identity_kept, found.kept, found.steps, perm.ffn});
  }
  if (output.selected) {
    const std::string name = tensor_name(b, "attn_output");
    auto s = scores_of(model, b, "attn_output", options, output.stats);
    if (!s.ok()) return s.error();
    // Per kv group: the rows of every query head reading it stacked, [n_embd * per_kv, head_dim].
    const int64_t hd = p.head_dim(), per_kv = p.n_head / p.n_head_kv, K = p.n_head * hd;
    PermutationReport r{b, name, 0, 0, 0, {}};
    perm.value.resize(static_cast<size_t>(p.n_head_kv * hd));
    std::vector<float> stacked(static_cast<size_t>(p.n_embd * per_kv * hd));
    for (int64_t g = 0; g < p.n_head_kv; ++g) {
      for (int64_t row = 0; row < p.n_embd; ++row) {
        for (int64_t hl = 0; hl < per_kv; ++hl) {
          const float* from = s->data() + row * K + (g * per_kv + hl) * hd;
          std::copy_n(from, hd, stacked.data() + (row * per_kv + hl) * hd);
        }
      }
      ChannelSearch found = search_channel_order(stacked.data(), p.n_embd * per_kv, hd, options.pattern);
      r.identity_kept += found.identity_kept;
      r.kept += found.kept;
      r.steps += found.steps;
      for (int64_t i = 0; i < hd; ++i) {
        perm.value[static_cast<size_t>(g * hd + i)] = static_cast<int32_t>(g * hd + found.perm[static_cast<size_t>(i)]);
      }
    }
    r.order = perm.value;
    report.push_back(std::move(r));
  }
  return perm;
}

Result<ChannelOrder> choose_input_order(const LlamaModel& model, int64_t b, const CalibOptions& options,
                                        const std::vector<std::string>& names, const InputStats* stats,
                                        const std::function<bool(const std::string&)>& selected,
                                        std::vector<PermutationReport>& report) {
  if (stats == nullptr) return ChannelOrder{};  // no pass ran (magnitude alone): no input statistics
  const int64_t K = stats->K();
  std::vector<float> stacked;
  std::string first;
  for (const std::string& linear : names) {
    if (!selected(linear)) continue;
    auto s = scores_of(model, b, linear, options, stats);  // [rows, K] row-major
    if (!s.ok()) return s.error();
    stacked.insert(stacked.end(), s->begin(), s->end());
    if (first.empty()) first = tensor_name(b, linear);
  }
  const auto rows = static_cast<int64_t>(stacked.size()) / std::max<int64_t>(K, 1);
  if (rows == 0) return ChannelOrder{};
  ChannelSearch found = search_channel_order(stacked.data(), rows, K, options.pattern);
  report.push_back({b, first, found.identity_kept, found.kept, found.steps, found.perm});
  return std::move(found.perm);
}

}  // namespace nmkit::calib_detail
