// nmkit inspect (zero fractions, sparsest compliant pattern, compressed weights by logical shape) and
// nmkit demo (with a given checkpoint, and its announced fallback to a generated one).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_harness.h"

namespace nmkit::cli_test {
namespace {

// Rows made of a repeated 8-element motif, so the compliant patterns are known by construction.
std::vector<float> repeat_motif(const std::vector<float>& motif, size_t rows, size_t K) {
  std::vector<float> v(rows * K);
  for (size_t i = 0; i < v.size(); ++i) v[i] = motif[(i % K) % motif.size()];
  return v;
}

class InspectCli : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    const std::vector<RawTensor> tensors{
        // 2 non-zeros per 8, both in the first 4: complies with 2:8 but not 1:4 (same density).
        {"two_of_eight", "F32", {2, 16}, f32_bytes(repeat_motif({1, 2, 0, 0, 0, 0, 0, 0}, 2, 16))},
        // K = 16: no group of any candidate (8:10 and 14:16 included) fits its 16 non-zeros.
        {"dense", "F32", {3, 16}, f32_bytes(repeat_motif({1, 2, 3, 4, 5, 6, 7, 8}, 3, 16))},
        // 6 of 8, three per half: not 2:4, not 4:8, not 4:6 (5 in the first 6), yes 6:8.
        {"six_of_eight", "BF16", {2, 8}, bf16_bytes(repeat_motif({1, 1, 1, 0, 1, 1, 1, 0}, 2, 8))},
        {"zeros", "F16", {4, 5}, f16_bytes(std::vector<float>(20, 0.0f))},
        {"negative_zeros", "F32", {1, 4}, f32_bytes({-0.0f, 1.0f, -0.0f, 0.0f})},
        {"vector", "F32", {7}, f32_bytes({0, 1, 0, 2, 0, 3, 4})},
        {"ints", "I32", {2, 2}, std::string("\x00\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x00\x01\x00\x00", 16)},
    };
    write_file("in.safetensors", safetensors_bytes(tensors));
  }

  nlohmann::json inspect_json(const std::string& file) {
    const RunResult r = run({"inspect", file, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    nlohmann::json by_name = nlohmann::json::object();
    const auto doc = nlohmann::json::parse(r.out);  // named: a range-for over parse(...).at() would dangle
    for (const auto& t : doc.at("tensors")) by_name[t.at("name").get<std::string>()] = t;
    return by_name;
  }
};

TEST_F(InspectCli, ReportsZerosAndSparsestPattern) {
  const auto t = inspect_json("in.safetensors");
  ASSERT_EQ(t.size(), 7u);
  EXPECT_EQ(t["two_of_eight"]["sparsest_pattern"], "2:8");
  EXPECT_DOUBLE_EQ(t["two_of_eight"]["zero_fraction"].get<double>(), 0.75);
  EXPECT_EQ(t["two_of_eight"]["shape"], nlohmann::json({2, 16}));
  EXPECT_TRUE(t["dense"]["sparsest_pattern"].is_null());
  EXPECT_DOUBLE_EQ(t["dense"]["zero_fraction"].get<double>(), 0.0);
  EXPECT_EQ(t["six_of_eight"]["sparsest_pattern"], "6:8");
  EXPECT_EQ(t["six_of_eight"]["dtype"], "BF16");
  EXPECT_EQ(t["zeros"]["sparsest_pattern"], "1:4");
  EXPECT_DOUBLE_EQ(t["zeros"]["zero_fraction"].get<double>(), 1.0);
  EXPECT_EQ(t["negative_zeros"]["sparsest_pattern"], "1:4");
  EXPECT_DOUBLE_EQ(t["negative_zeros"]["zero_fraction"].get<double>(), 0.75);
  EXPECT_TRUE(t["vector"]["sparsest_pattern"].is_null());
  EXPECT_DOUBLE_EQ(t["vector"]["zero_fraction"].get<double>(), 3.0 / 7.0);
  EXPECT_TRUE(t["ints"]["sparsest_pattern"].is_null());
  EXPECT_DOUBLE_EQ(t["ints"]["zero_fraction"].get<double>(), 0.25);
  EXPECT_TRUE(t["ints"]["format"].is_null());
}

TEST_F(InspectCli, TablePrintsEveryTensor) {
  const RunResult r = run({"inspect", "in.safetensors"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"two_of_eight", "dense", "six_of_eight", "zeros", "vector", "ints"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
  EXPECT_NE(r.out.find("2:8"), std::string::npos);
  EXPECT_NE(r.out.find("none"), std::string::npos);
}

TEST_F(InspectCli, CompressedWeightsByLogicalShape) {
  for (const char* format : {"nm", "sparse24", "dense"}) {
    SCOPED_TRACE(format);
    const std::string out = std::string("out_") + format + ".safetensors";
    const RunResult p = run({"prune", "in.safetensors", "-o", out, "--pattern", "2:4", "--format", format, "--exclude",
                             "zeros|ints"});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    const auto t = inspect_json(out);
    ASSERT_EQ(t.size(), 7u) << "compressed parts must be grouped into one logical tensor";
    for (const char* name : {"two_of_eight", "dense", "six_of_eight"}) {
      EXPECT_EQ(t[name]["format"], format) << name;
      EXPECT_EQ(t[name]["pattern"], "2:4") << name;
      EXPECT_EQ(t[name]["complies_with_pattern"], true) << name;
      EXPECT_EQ(t[name]["parts"].size(), std::string(format) == "dense" ? 1u : 2u) << name;
    }
    EXPECT_EQ(t["dense"]["shape"], nlohmann::json({3, 16}));
    EXPECT_DOUBLE_EQ(t["dense"]["zero_fraction"].get<double>(), 0.5);
    EXPECT_EQ(t["dense"]["sparsest_pattern"], "2:4");
    EXPECT_EQ(t["two_of_eight"]["sparsest_pattern"], "2:8");  // already sparser than 2:4: unchanged
    EXPECT_TRUE(t["zeros"]["format"].is_null());
  }
}

TEST_F(InspectCli, CorruptFileIsOneLineError) {
  const std::string good = read_file("in.safetensors");
  write_file("bad.safetensors", good.substr(0, 20));
  expect_clean_failure({"inspect", "bad.safetensors"}, {"bad.safetensors"});
}

TEST_F(InspectCli, DemoOnAGivenCheckpoint) {
  const RunResult r = run({"demo", "--model", "in.safetensors", "--out", "demo"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("GENERATED"), std::string::npos) << r.out;
  for (const char* p : {"2:4", "4:8", "6:8", "relative_error", "retained_l1", "approximation_error"}) {
    EXPECT_NE(r.out.find(p), std::string::npos) << p;
  }
  size_t ok = 0;
  for (size_t at = r.out.find(": OK"); at != std::string::npos; at = r.out.find(": OK", at + 1)) ++ok;
  EXPECT_EQ(ok, 3u) << r.out;
  EXPECT_TRUE(exists("demo/in.2-4.sparse24.safetensors"));
  EXPECT_TRUE(exists("demo/in.4-8.nm.safetensors"));
  EXPECT_TRUE(exists("demo/in.6-8.nm.safetensors"));
}

TEST_F(InspectCli, DemoFallsBackToAGeneratedCheckpointAndSaysSo) {
  const RunResult r = run({"demo", "--model", "missing.safetensors", "--out", "demo"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("GENERATED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("missing.safetensors"), std::string::npos) << r.out;
  size_t ok = 0;
  for (size_t at = r.out.find(": OK"); at != std::string::npos; at = r.out.find(": OK", at + 1)) ++ok;
  EXPECT_EQ(ok, 3u) << r.out;
}

}  // namespace
}  // namespace nmkit::cli_test
