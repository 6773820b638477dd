// nmkit prune on small generated checkpoints: what is pruned and what is copied, the output's
// compliance and metadata, the printed table and the JSON report, quiet stderr when piped.
// (Bit-exact agreement with docs/design.md is checked by independent_prune.py; here the checks are
// structural and against the input itself.)
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_harness.h"
#include "nmkit/checkpoint.h"
#include "nmkit/format.h"
#include "nmkit/safetensors.h"

namespace nmkit::cli_test {
namespace {

constexpr uint64_t kSeed = 7001;

std::vector<float> small_ints(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(-6, 6);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(dist(rng));
  return v;
}

class PruneCli : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    SCOPED_TRACE("seed " + std::to_string(kSeed));
    std::mt19937 rng(kSeed);
    inputs_ = {
        {"model.layers.0.self_attn.q_proj.weight", "F32", {7, 17}, {}},
        {"model.layers.0.mlp.up_proj.weight", "BF16", {5, 16}, {}},
        {"model.layers.0.mlp.down_proj.weight", "F16", {3, 15}, {}},
        {"model.embed_tokens.weight", "F32", {6, 8}, {}},
        {"model.layers.0.input_layernorm.weight", "F32", {17}, {}},
        {"model.layers.0.counts", "I32", {2, 8}, {}},
        {"model.layers.0.conv.weight", "F32", {2, 3, 4}, {}},
    };
    for (auto& t : inputs_) {
      size_t n = 1;
      for (auto d : t.shape) n *= static_cast<size_t>(d);
      if (t.dtype == "I32") {
        t.bytes = std::string(n * 4, '\x01');
      } else {
        t.bytes = bytes_in(t.dtype, small_ints(n, rng));
      }
    }
    write_file("in.safetensors", safetensors_bytes(inputs_, {{"format", "pt"}, {"origin", "cli test"}}));
  }

  const RawTensor& input(const std::string& name) const {
    for (const auto& t : inputs_)
      if (t.name == name) return t;
    throw std::runtime_error("no input " + name);
  }

  std::vector<RawTensor> inputs_;
};

bool is_pruned_by_default(const std::string& name) {
  return name.find("proj") != std::string::npos;  // 2-D float, not embed/norm; counts are I32, conv is 3-D
}

TEST_F(PruneCli, DenseOutputCompliesAndCopiesTheRest) {
  const RunResult r = run({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "2:4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "stderr must stay quiet when it is not a terminal";
  auto out = SafetensorsFile::open(path("out.safetensors"));
  ASSERT_TRUE(out.ok()) << out.error().message();
  ASSERT_EQ(out->tensors().size(), inputs_.size());
  for (const auto& t : inputs_) {
    auto view = out->view(t.name);
    ASSERT_TRUE(view.ok()) << t.name;
    ASSERT_EQ(view->nbytes(), t.bytes.size());
    const bool same = std::memcmp(view->data, t.bytes.data(), t.bytes.size()) == 0;
    if (is_pruned_by_default(t.name)) {
      EXPECT_FALSE(find_violation(*view, Pattern{2, 4}).has_value()) << t.name;
      EXPECT_FALSE(same) << t.name << " was not pruned";
      // Every element is either the input's value or +0.
      const auto got = to_f32(*view);
      const TensorView in_view{view->dtype, view->shape, reinterpret_cast<const std::byte*>(t.bytes.data())};
      const auto want = to_f32(in_view);
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(got[i] == want[i] || (got[i] == 0 && !std::signbit(got[i]))) << t.name << " element " << i;
      }
      const auto it = out->metadata().find(record_key(t.name));
      ASSERT_NE(it, out->metadata().end()) << t.name;
      auto record = decode_record("out.safetensors", t.name, it->second);
      ASSERT_TRUE(record.ok()) << record.error().message();
      EXPECT_EQ(record->format, WeightFormat::Dense);
      EXPECT_EQ(record->pattern, (Pattern{2, 4}));
      EXPECT_EQ(record->shape, view->shape);
    } else {
      EXPECT_TRUE(same) << t.name << " must be copied unchanged";
      EXPECT_EQ(out->metadata().count(record_key(t.name)), 0u) << t.name;
    }
  }
  EXPECT_EQ(out->metadata().at("format"), "pt");
  EXPECT_EQ(out->metadata().at("origin"), "cli test");
  // The table: a row per pruned tensor, and a total row.
  for (const auto& t : inputs_) {
    EXPECT_EQ(r.out.find(t.name) != std::string::npos, is_pruned_by_default(t.name)) << t.name << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("total (3 tensors)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("approx_error"), std::string::npos);
  EXPECT_EQ(listing(), (std::vector<std::string>{"in.safetensors", "out.safetensors"}));
}

TEST_F(PruneCli, ReportTotalsAreSumsOfTheTensors) {
  const RunResult r = run({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "3:7", "--format", "nm",
                           "--report", "report.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(read_file("report.json"));
  EXPECT_EQ(report.at("pattern"), "3:7");
  EXPECT_EQ(report.at("method"), "magnitude");
  ASSERT_EQ(report.at("tensors").size(), 3u);
  int64_t total = 0, pruned = 0, bytes = 0;
  double pruned_abs = 0;
  for (const auto& [name, m] : report.at("tensors").items()) {
    ASSERT_TRUE(is_pruned_by_default(name)) << name;
    for (const char* key : {"total_count", "pruned_count", "sparsity_percent", "approximation_error",
                            "kept_magnitude_mean", "pruned_magnitude_mean", "relative_error", "retained_l1",
                            "memory_bytes"}) {
      EXPECT_TRUE(m.contains(key)) << name << " lacks " << key;
    }
    const RawTensor& in = input(name);
    EXPECT_EQ(m.at("total_count").get<int64_t>(), in.shape[0] * in.shape[1]);
    // 3:7 keeps min(3, t) of every group: count kept per row independently of nmkit.
    const int64_t K = in.shape[1];
    const int64_t kept_per_row = (K / 7) * 3 + std::min<int64_t>(3, K % 7);
    EXPECT_EQ(m.at("pruned_count").get<int64_t>(), in.shape[0] * (K - kept_per_row)) << name;
    // nm: values (groups*keep slots) + mask (ceil(K_pad/8) bytes) per row.
    const int64_t groups = (K + 6) / 7;
    const int64_t elem = in.dtype == "F32" ? 4 : 2;
    EXPECT_EQ(m.at("memory_bytes").get<int64_t>(), in.shape[0] * (groups * 3 * elem + (groups * 7 + 7) / 8)) << name;
    total += m.at("total_count").get<int64_t>();
    pruned += m.at("pruned_count").get<int64_t>();
    bytes += m.at("memory_bytes").get<int64_t>();
    pruned_abs += m.at("approximation_error").get<double>() * m.at("total_count").get<double>();
  }
  const auto& t = report.at("total");
  EXPECT_EQ(t.at("total_count").get<int64_t>(), total);
  EXPECT_EQ(t.at("pruned_count").get<int64_t>(), pruned);
  EXPECT_EQ(t.at("memory_bytes").get<int64_t>(), bytes);
  EXPECT_NEAR(t.at("approximation_error").get<double>(), pruned_abs / static_cast<double>(total), 1e-12);
  EXPECT_NEAR(t.at("sparsity_percent").get<double>(), 100.0 * static_cast<double>(pruned) / static_cast<double>(total),
              1e-12);
}

TEST_F(PruneCli, Sparse24OutputStoresPartsWithRecords) {
  const RunResult r = run({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "1:4", "--format",
                           "sparse24"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto out = SafetensorsFile::open(path("out.safetensors"));
  ASSERT_TRUE(out.ok()) << out.error().message();
  auto stored = list_stored(*out);
  ASSERT_TRUE(stored.ok()) << stored.error().message();
  ASSERT_EQ(stored->size(), inputs_.size());
  int compressed = 0;
  for (const auto& st : *stored) {
    const RawTensor& in = input(st.name);
    if (!is_pruned_by_default(st.name)) {
      EXPECT_FALSE(st.record.has_value()) << st.name;
      continue;
    }
    ++compressed;
    ASSERT_TRUE(st.record.has_value()) << st.name;
    EXPECT_EQ(st.record->format, WeightFormat::Sparse24);
    EXPECT_EQ(st.record->pattern, (Pattern{2, 4}));  // the format's pattern; the weights are 1:4
    EXPECT_EQ(st.record->shape, (Shape{in.shape[0], in.shape[1]}));
    ASSERT_EQ(st.parts.size(), 2u);
    EXPECT_EQ(st.parts[0]->name, st.name + ".values");
    EXPECT_EQ(st.parts[1]->name, st.name + ".meta");
    auto loaded = load_weight(*out, st);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message();
    const Tensor dense = decompress(std::get<Sparse24>(*loaded));
    EXPECT_FALSE(find_violation(dense.view(), Pattern{1, 4}).has_value()) << st.name;
  }
  EXPECT_EQ(compressed, 3);
}

TEST_F(PruneCli, IncludeAndExcludeSelectByRegexSearch) {
  const RunResult r = run({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "2:8", "--include",
                           "mlp", "--exclude", "down", "--report", "report.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(read_file("report.json"));
  ASSERT_EQ(report.at("tensors").size(), 1u);
  EXPECT_TRUE(report.at("tensors").contains("model.layers.0.mlp.up_proj.weight"));
  // An empty --exclude prunes the embedding too (the norm is 1-D and never pruned).
  const RunResult all = run({"prune", "in.safetensors", "-o", "all.safetensors", "--pattern", "2:8", "--exclude", "",
                             "--report", "all.json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const auto all_report = nlohmann::json::parse(read_file("all.json"));
  EXPECT_EQ(all_report.at("tensors").size(), 4u);
  EXPECT_TRUE(all_report.at("tensors").contains("model.embed_tokens.weight"));
}

TEST_F(PruneCli, PruningAPrunedCheckpointAgainChangesNothing) {
  ASSERT_EQ(run({"prune", "in.safetensors", "-o", "once.safetensors", "--pattern", "4:8"}).exit_code, 0);
  ASSERT_EQ(run({"prune", "once.safetensors", "-o", "twice.safetensors", "--pattern", "4:8"}).exit_code, 0);
  auto once = SafetensorsFile::open(path("once.safetensors"));
  auto twice = SafetensorsFile::open(path("twice.safetensors"));
  ASSERT_TRUE(once.ok() && twice.ok());
  for (const auto& info : once->tensors()) {
    const TensorView a = once->view(info);
    auto b = twice->view(info.name);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(std::memcmp(a.data, b->data, a.nbytes()), 0) << info.name;
  }
  EXPECT_EQ(once->metadata(), twice->metadata());
}

TEST_F(PruneCli, CompressedWeightsPassThroughASecondPrune) {
  ASSERT_EQ(run({"prune", "in.safetensors", "-o", "nm.safetensors", "--pattern", "4:8", "--format", "nm"}).exit_code,
            0);
  const RunResult r = run({"prune", "nm.safetensors", "-o", "again.safetensors", "--pattern", "2:4", "--report",
                           "report.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(read_file("report.json")).at("tensors").size(), 0u);
  EXPECT_NE(r.out.find("no tensor was selected"), std::string::npos) << r.out;
  auto first = SafetensorsFile::open(path("nm.safetensors"));
  auto second = SafetensorsFile::open(path("again.safetensors"));
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_EQ(first->tensors().size(), second->tensors().size());
  for (const auto& info : first->tensors()) {
    const TensorView a = first->view(info);
    auto b = second->view(info.name);
    ASSERT_TRUE(b.ok()) << info.name;
    ASSERT_EQ(a.nbytes(), b->nbytes()) << info.name;
    EXPECT_EQ(std::memcmp(a.data, b->data, a.nbytes()), 0) << info.name;
  }
  EXPECT_EQ(first->metadata(), second->metadata());
}

TEST_F(PruneCli, HelpListsTheOptions) {
  const RunResult r = run({"prune", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option : {"--pattern", "--method", "--grad", "--act-norms", "--include", "--exclude", "--format",
                             "--report", "embed|norm|lm_head|wte|wpe"}) {
    EXPECT_NE(r.out.find(option), std::string::npos) << option;
  }
  const RunResult top = run({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  for (const char* cmd : {"prune", "inspect", "demo"}) EXPECT_NE(top.out.find(cmd), std::string::npos) << cmd;
}

}  // namespace
}  // namespace nmkit::cli_test
