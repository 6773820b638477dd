// Free channel permutations (docs/design.md 12.2): the assignment solver and the search against brute
// force, the permuted block computing the same function in every family (and a wrong permutation
// not), and the calibrator pruning exactly the permuted weights with consistently permuted
// statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <random>

#include "nmkit/calib_model.h"
#include "nmkit/permute.h"
#include "model/family.h"

namespace nmkit {
namespace {

std::vector<float> random_scores(int64_t rows, int64_t K, std::mt19937_64& rng) {
  std::exponential_distribution<float> d(1.0f);
  std::vector<float> s(static_cast<size_t>(rows * K));
  for (float& x : s) x = d(rng);
  return s;
}

TEST(Permute, AssignmentEqualsBruteForce) {
  std::mt19937_64 rng(7);
  for (int64_t n = 1; n <= 7; ++n) {
    for (int trial = 0; trial < 20; ++trial) {
      std::normal_distribution<double> d(0.0, 1.0);
      std::vector<double> gain(static_cast<size_t>(n * n));
      for (double& g : gain) g = d(rng);
      const std::vector<int32_t> got = max_assignment(gain, n);
      std::vector<int32_t> check = got;
      std::sort(check.begin(), check.end());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(check[static_cast<size_t>(i)], i);  // a permutation
      double got_sum = 0;
      for (int64_t i = 0; i < n; ++i) got_sum += gain[static_cast<size_t>(i * n + got[static_cast<size_t>(i)])];
      std::vector<int32_t> p(static_cast<size_t>(n));
      std::iota(p.begin(), p.end(), 0);
      double best = -1e300;
      do {
        double s = 0;
        for (int64_t i = 0; i < n; ++i) s += gain[static_cast<size_t>(i * n + p[static_cast<size_t>(i)])];
        best = std::max(best, s);
      } while (std::next_permutation(p.begin(), p.end()));
      EXPECT_NEAR(got_sum, best, 1e-9) << "n " << n << " trial " << trial;
    }
  }
}

// The kept importance by brute force over every partition of the columns into groups.
double best_partition(const std::vector<float>& s, int64_t rows, int64_t K, Pattern pattern) {
  ChannelOrder p(static_cast<size_t>(K));
  std::iota(p.begin(), p.end(), 0);
  double best = 0;
  do {
    best = std::max(best, kept_importance(s.data(), rows, K, pattern, p));
  } while (std::next_permutation(p.begin(), p.end()));
  return best;
}

// Two groups (K = 2 x group): never below the identity nor above the optimum over every
// permutation, and at that optimum in most cases (the search is a local one: each step is exact, the
// sequence of steps is not; docs/design.md 12.2).
TEST(Permute, SearchAgainstEveryPermutationOnTinyRows) {
  std::mt19937_64 rng(11);
  int optimal = 0, trials = 0;
  for (Pattern pattern : {Pattern{1, 2}, Pattern{2, 4}, Pattern{1, 4}, Pattern{3, 4}}) {
    for (int trial = 0; trial < 30; ++trial, ++trials) {
      const int64_t rows = 1 + trial % 4, K = 2 * pattern.group;
      const std::vector<float> s = random_scores(rows, K, rng);
      const ChannelSearch found = search_channel_order(s.data(), rows, K, pattern);
      const double best = best_partition(s, rows, K, pattern);
      EXPECT_NEAR(found.kept, kept_importance(s.data(), rows, K, pattern, found.perm), 1e-9);
      EXPECT_GE(found.kept, found.identity_kept);
      EXPECT_LE(found.kept, best + 1e-5);
      optimal += found.kept >= best - 1e-5;
    }
  }
  std::printf("search at the brute-force optimum in %d of %d tiny cases\n", optimal, trials);
  EXPECT_GE(optimal, trials * 3 / 4);
}

// More groups: the search ends where no exact step improves: for every position, no reassignment of
// the columns at that position (all of them, by brute force) keeps more.
TEST(Permute, SearchEndsAtAnOptimumOfEveryAssignmentStep) {
  std::mt19937_64 rng(13);
  const Pattern pattern{2, 4};
  for (int trial = 0; trial < 10; ++trial) {
    const int64_t rows = 5, G = 5, K = G * pattern.group;
    const std::vector<float> s = random_scores(rows, K, rng);
    const ChannelSearch found = search_channel_order(s.data(), rows, K, pattern);
    EXPECT_GE(found.kept, found.identity_kept);
    for (int t = 0; t < pattern.group; ++t) {
      std::vector<int32_t> a(static_cast<size_t>(G));
      std::iota(a.begin(), a.end(), 0);
      do {
        ChannelOrder p = found.perm;
        for (int64_t g = 0; g < G; ++g) {
          p[static_cast<size_t>(a[static_cast<size_t>(g)] * pattern.group + t)] = found.perm[static_cast<size_t>(g * pattern.group + t)];
        }
        EXPECT_LE(kept_importance(s.data(), rows, K, pattern, p), found.kept + 1e-4) << "trial " << trial;
      } while (std::next_permutation(a.begin(), a.end()));
    }
  }
}

TEST(Permute, NoSearchWithoutWholeGroups) {
  std::mt19937_64 rng(3);
  const std::vector<float> s = random_scores(3, 10, rng);
  const ChannelSearch found = search_channel_order(s.data(), 3, 10, Pattern{2, 4});  // 10 % 4 != 0
  for (int64_t k = 0; k < 10; ++k) EXPECT_EQ(found.perm[static_cast<size_t>(k)], k);
}

// --- the block ---

LlamaParams family_params(const std::string& arch) {
  LlamaParams p;
  p.arch = arch;
  p.n_vocab = 64;
  p.n_embd = 32;
  p.n_layer = 2;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.n_ff = 48;
  p.n_ctx_train = 64;
  p.rms_eps = 1e-5f;
  p.tied_output = true;
  if (arch == "gemma3") {
    p.sliding_window = 8;
    p.local_layers = {1, 0};
  }
  return p;
}

std::map<std::string, Tensor> family_tensors(const LlamaParams& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::map<std::string, Tensor> t;
  for (const model::ModelTensorName& n : model::model_tensor_names(p)) {
    std::vector<float> v(static_cast<size_t>(shape_numel(n.shape)));
    if (n.shape.size() == 1) {
      std::uniform_real_distribution<float> d(n.gguf.ends_with("norm.weight") ? 0.5f : -0.5f, 1.5f);
      for (float& x : v) x = d(rng);
    } else {
      std::normal_distribution<float> d(0.0f, 1.0f / std::sqrt(static_cast<float>(n.shape[1])));
      for (float& x : v) x = d(rng);
    }
    t[n.gguf] = Tensor::from_f32(v, n.shape);
  }
  return t;
}

LlamaModel build_model(const LlamaParams& p, const std::map<std::string, Tensor>& tensors) {
  ModelOptions o;
  o.keep_dense_weights = true;
  auto load = [&tensors](const std::string& name) -> Result<Tensor> {
    auto it = tensors.find(name);
    if (it == tensors.end()) return Error("no tensor " + name);
    return Tensor::copy_of(it->second.view());
  };
  auto m = LlamaModel::build(p, load, o);
  EXPECT_TRUE(m.ok()) << m.error().message();
  return std::move(*m);
}

std::vector<float> logits_of(const LlamaModel& model, const std::vector<int32_t>& tokens) {
  auto session = LlamaSession::create(model, static_cast<int64_t>(tokens.size()));
  EXPECT_TRUE(session.ok());
  std::vector<float> logits(tokens.size() * static_cast<size_t>(model.params().n_vocab));
  EXPECT_TRUE(model.forward(*session, tokens.data(), static_cast<int64_t>(tokens.size()), logits.data(), 0).ok());
  return logits;
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

// Random orders: any of the ffn channels, any within each kv head for the values.
BlockPermutation random_permutation(const LlamaParams& p, std::mt19937_64& rng) {
  BlockPermutation perm;
  perm.ffn.resize(static_cast<size_t>(p.n_ff));
  std::iota(perm.ffn.begin(), perm.ffn.end(), 0);
  std::shuffle(perm.ffn.begin(), perm.ffn.end(), rng);
  const int64_t hd = p.head_dim();
  perm.value.resize(static_cast<size_t>(p.n_head_kv * hd));
  std::iota(perm.value.begin(), perm.value.end(), 0);
  for (int64_t g = 0; g < p.n_head_kv; ++g) std::shuffle(perm.value.begin() + g * hd, perm.value.begin() + (g + 1) * hd, rng);
  return perm;
}

class PermuteFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(PermuteFamily, PermutedModelGivesTheSameLogits) {
  const LlamaParams p = family_params(GetParam());
  const auto tensors = family_tensors(p, 5);
  std::mt19937_64 rng(17);
  std::vector<int32_t> tokens(24);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 64);
  LlamaModel model = build_model(p, tensors);
  const std::vector<float> before = logits_of(model, tokens);
  double scale = 0;
  for (float x : before) scale = std::max(scale, double(std::abs(x)));
  for (int64_t b = 0; b < p.n_layer; ++b) ASSERT_TRUE(permute_block(model, b, random_permutation(p, rng)).ok());
  EXPECT_LE(max_difference(before, logits_of(model, tokens)), 1e-5 * scale) << GetParam();

  // A wrong permutation (the values' order applied to attn_v but not to attn_output, or the ffn
  // order to gate and up but not to down) changes the function: the comparison above can fail.
  for (int wrong = 0; wrong < 2; ++wrong) {
    LlamaModel broken = build_model(p, tensors);
    BlockPermutation perm = random_permutation(p, rng);
    auto down = broken.load_dense_weight(0, wrong == 0 ? "attn_output" : "ffn_down");
    ASSERT_TRUE(down.ok());
    ASSERT_TRUE(permute_block(broken, 0, perm).ok());
    ASSERT_TRUE(broken.replace_linear(0, wrong == 0 ? "attn_output" : "ffn_down", down->view(), LinearFormat::Dense).ok());
    EXPECT_GT(max_difference(before, logits_of(broken, tokens)), 1e-3 * scale) << GetParam() << " " << wrong;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, PermuteFamily, ::testing::Values("llama", "qwen2", "qwen3", "gemma3"));

bool same_bits(const TensorView& a, const TensorView& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

// The calibrator prunes exactly the permuted weights with the permuted statistics: block 0's
// ffn_down and attn_output equal the method run by hand on the permuted weight and the permuted
// statistics of the block's own inputs (the embeddings); gate/up/v rows and the v bias follow.
TEST(Permute, CalibratorPrunesThePermutedWeightsWithPermutedStatistics) {
  const LlamaParams p = family_params("qwen2");
  const auto tensors = family_tensors(p, 9);
  std::mt19937_64 rng(21);
  const int64_t n_seq = 3, len = 16;
  std::vector<int32_t> tokens(static_cast<size_t>(n_seq * len));
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 64);
  for (CalibMethod method : {CalibMethod::Magnitude, CalibMethod::Wanda, CalibMethod::SparseGpt}) {
    // Block 0's input statistics, gathered by hand.
    LlamaModel fresh = build_model(p, tensors);
    std::vector<float> hidden(tokens.size() * static_cast<size_t>(p.n_embd));
    ASSERT_TRUE(fresh.embed(tokens.data(), n_seq * len, hidden.data()).ok());
    std::map<std::string, std::unique_ptr<InputStats>> stats;
    ASSERT_TRUE(fresh.run_block(0, hidden.data(), n_seq, len, [&](const LinearInput& in) -> Status {
      auto& s = stats[in.names.front()];
      if (!s) s = std::make_unique<InputStats>(in.K, true);
      s->add(in.x, in.tokens);
      return ok_status();
    }).ok());

    LlamaModel model = build_model(p, tensors);
    CalibOptions o;
    o.pattern = Pattern{4, 8};
    o.method = method;
    o.permute = true;
    o.output_error = false;
    std::vector<NamedTensor> block0;
    o.on_pruned = [&](int64_t b, std::vector<NamedTensor> pruned) -> Status {
      if (b == 0) block0 = std::move(pruned);
      return ok_status();
    };
    auto report = calibrate_and_prune(model, tokens, n_seq, len, o);
    ASSERT_TRUE(report.ok()) << report.error().message();
    ASSERT_EQ(report->permutations.size(), 4u);
    for (const PermutationReport& r : report->permutations) EXPECT_GE(r.kept, r.identity_kept) << r.name;
    const ChannelOrder& ffn = report->permutations[0].order;
    const ChannelOrder& value = report->permutations[1].order;
    ASSERT_EQ(block0.size(), 8u);  // the 7 linears and the moved v bias
    auto got = [&](const std::string& name) {
      for (const NamedTensor& t : block0) {
        if (t.name == "blk.0." + name) return t.tensor.view();
      }
      ADD_FAILURE() << name;
      return TensorView{};
    };
    auto expect = [&](const std::string& linear, const Tensor& w, const std::string& input,
                      const ChannelOrder& order) {
      Tensor want;
      if (method == CalibMethod::Magnitude) {
        want = std::move(prune(w.view(), o.pattern, PruneMethod::Magnitude)->pruned);
      } else if (method == CalibMethod::Wanda) {
        std::vector<float> a = stats[input]->act_norms(), moved(a.size());
        for (size_t k = 0; k < a.size(); ++k) moved[k] = order.empty() ? a[k] : a[static_cast<size_t>(order[k])];
        want = std::move(wanda_prune(w.view(), moved, o.pattern)->pruned);
      } else {
        const std::vector<double> H = permute_symmetric(stats[input]->hessian(), w.shape()[1], order);
        want = std::move(sparsegpt_prune(w.view(), H.data(), o.pattern)->pruned);
      }
      EXPECT_TRUE(same_bits(got(linear + ".weight"), want.view())) << calib_method_name(method) << " " << linear;
    };
    const ChannelOrder o_cols = output_columns(p, value);
    expect("ffn_down", permute_columns(tensors.at("blk.0.ffn_down.weight").view(), ffn), "ffn_down", ffn);
    expect("attn_output", permute_columns(tensors.at("blk.0.attn_output.weight").view(), o_cols), "attn_output", o_cols);
    expect("ffn_gate", permute_rows(tensors.at("blk.0.ffn_gate.weight").view(), ffn), "ffn_gate", {});
    expect("attn_v", permute_rows(tensors.at("blk.0.attn_v.weight").view(), value), "attn_q", {});
    expect("attn_q", Tensor::copy_of(tensors.at("blk.0.attn_q.weight").view()), "attn_q", {});
    const Tensor bias = permute_rows(TensorView{DType::F32, {p.n_head_kv * p.head_dim(), 1},
                                                tensors.at("blk.0.attn_v.bias").data()}, value);
    EXPECT_EQ(std::memcmp(got("attn_v.bias").data, bias.data(), bias.nbytes()), 0);
    auto model_bias = model.block_vector(0, "attn_v.bias");
    ASSERT_TRUE(model_bias.ok());
    EXPECT_EQ(std::memcmp(model_bias->data, bias.data(), bias.nbytes()), 0);
  }
}

}  // namespace
}  // namespace nmkit
