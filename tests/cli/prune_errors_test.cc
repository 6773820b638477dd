// Every bad input of the Errors section: non-zero exit, one line on stderr naming the file,
// tensor and value, and no output file, report or temporary left behind.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/cli/cli_harness.h"

namespace nmkit::cli_test {
namespace {

constexpr const char* kPruneWeight = "layers.0.q.weight";

// Small integers: exact in every dtype. 3 rows x 10 columns (K not a multiple of 4 or 8).
std::vector<float> weight_values() {
  std::vector<float> v(30);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
  return v;
}

class PruneErrors : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    write_input(weight_values());
    write_file("g.safetensors", safetensors_bytes({{kPruneWeight, "F32", {3, 10}, f32_bytes(weight_values())}}));
    write_file("a.safetensors", safetensors_bytes({{kPruneWeight, "F32", {10}, f32_bytes(std::vector<float>(10, 1.0f))}}));
  }

  void write_input(const std::vector<float>& values) {
    write_file("in.safetensors", safetensors_bytes({{kPruneWeight, "F32", {3, 10}, f32_bytes(values)},
                                                    {"layers.0.norm.weight", "F32", {10}, f32_bytes(std::vector<float>(10, 1.0f))}},
                                                   {{"format", "pt"}}));
  }

  static std::vector<std::string> prune_args(std::vector<std::string> extra) {
    std::vector<std::string> args{"prune", "in.safetensors", "-o", "out.safetensors", "--report", "report.json"};
    if (std::find(extra.begin(), extra.end(), "--pattern") == extra.end()) {
      args.push_back("--pattern");
      args.push_back("2:4");
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
};

TEST_F(PruneErrors, TruncatedFile) {
  const std::string good = read_file("in.safetensors");
  write_file("in.safetensors", good.substr(0, good.size() - 9));
  expect_clean_failure(prune_args({}), {"in.safetensors"});
}

TEST_F(PruneErrors, FileShorterThanTheLengthPrefix) {
  write_file("in.safetensors", std::string("\x10\x00\x00", 3));
  expect_clean_failure(prune_args({}), {"in.safetensors"});
}

TEST_F(PruneErrors, HeaderLengthBeyondTheFile) {
  const std::string good = read_file("in.safetensors");
  std::string bad = good;
  bad[5] = '\x01';  // header length of about 2^40 bytes
  write_file("in.safetensors", bad);
  expect_clean_failure(prune_args({}), {"in.safetensors"});
}

TEST_F(PruneErrors, CorruptHeaderJson) {
  const std::vector<RawTensor> tensors{{kPruneWeight, "F32", {3, 10}, f32_bytes(weight_values())}};
  std::string header = header_of(tensors).dump();
  header[header.size() / 2] = '{';
  write_file("in.safetensors", safetensors_bytes(header, data_of(tensors)));
  expect_clean_failure(prune_args({}), {"in.safetensors"});
}

TEST_F(PruneErrors, OffsetsOutsideTheFile) {
  const std::vector<RawTensor> tensors{{kPruneWeight, "F32", {3, 10}, f32_bytes(weight_values())}};
  auto header = header_of(tensors);
  header[kPruneWeight]["data_offsets"] = {0, 4000};
  header[kPruneWeight]["shape"] = {100, 10};
  write_file("in.safetensors", safetensors_bytes(header.dump(), data_of(tensors)));
  expect_clean_failure(prune_args({}), {"in.safetensors", kPruneWeight, "4000"});
}

TEST_F(PruneErrors, ShapeAndByteLengthMismatch) {
  const std::vector<RawTensor> tensors{{kPruneWeight, "F32", {3, 10}, f32_bytes(weight_values())}};
  auto header = header_of(tensors);
  header[kPruneWeight]["shape"] = {3, 9};  // 108 bytes of shape for 120 bytes of data
  write_file("in.safetensors", safetensors_bytes(header.dump(), data_of(tensors)));
  expect_clean_failure(prune_args({}), {"in.safetensors", kPruneWeight, "[3, 9]"});
}

TEST_F(PruneErrors, UnknownDtype) {
  const std::vector<RawTensor> tensors{{kPruneWeight, "F32", {3, 10}, f32_bytes(weight_values())}};
  auto header = header_of(tensors);
  header[kPruneWeight]["dtype"] = "F31";
  write_file("in.safetensors", safetensors_bytes(header.dump(), data_of(tensors)));
  expect_clean_failure(prune_args({}), {"in.safetensors", kPruneWeight, "F31"});
}

TEST_F(PruneErrors, MissingInputFile) {
  expect_clean_failure({"prune", "nothere.safetensors", "-o", "out.safetensors", "--pattern", "2:4"},
                       {"nothere.safetensors"});
}

TEST_F(PruneErrors, NaNWeight) {
  auto values = weight_values();
  values[1 * 10 + 7] = std::numeric_limits<float>::quiet_NaN();
  write_input(values);
  expect_clean_failure(prune_args({}), {"in.safetensors", kPruneWeight, "row 1", "7", "nan"});
}

TEST_F(PruneErrors, InfiniteWeight) {
  auto values = weight_values();
  values[2 * 10 + 3] = -std::numeric_limits<float>::infinity();
  write_input(values);
  expect_clean_failure(prune_args({}), {"in.safetensors", kPruneWeight, "row 2", "3", "-inf"});
}

TEST_F(PruneErrors, NaNWeightInCompressedFormat) {
  auto values = weight_values();
  values[5] = std::numeric_limits<float>::quiet_NaN();
  write_input(values);
  expect_clean_failure(prune_args({"--format", "nm"}), {"in.safetensors", kPruneWeight, "row 0", "5", "nan"});
}

TEST_F(PruneErrors, InfiniteGradient) {
  auto values = weight_values();
  values[4] = std::numeric_limits<float>::infinity();
  write_file("g.safetensors", safetensors_bytes({{kPruneWeight, "F32", {3, 10}, f32_bytes(values)}}));
  expect_clean_failure(prune_args({"--method", "gradient", "--grad", "g.safetensors"}),
                       {"g.safetensors", kPruneWeight, "gradient", "4", "inf"});
}

TEST_F(PruneErrors, NaNNorm) {
  std::vector<float> norms(10, 1.0f);
  norms[6] = std::numeric_limits<float>::quiet_NaN();
  write_file("a.safetensors", safetensors_bytes({{kPruneWeight, "F32", {10}, f32_bytes(norms)}}));
  expect_clean_failure(prune_args({"--method", "wanda", "--act-norms", "a.safetensors"}),
                       {"a.safetensors", kPruneWeight, "6", "nan"});
}

// A negative norm (issue 13 W4) is blamed on the norms' file, from the Error's operand (issue 9.5).
TEST_F(PruneErrors, NegativeNormNamesTheNormsFile) {
  std::vector<float> norms(10, 1.0f);
  norms[3] = -2.0f;
  write_file("a.safetensors", safetensors_bytes({{kPruneWeight, "F32", {10}, f32_bytes(norms)}}));
  expect_clean_failure(prune_args({"--method", "wanda", "--act-norms", "a.safetensors"}),
                       {"nmkit: a.safetensors: tensor 'layers.0.q.weight': act_norms at column 3 is -2"});
}

TEST_F(PruneErrors, MissingGradientTensor) {
  write_file("g.safetensors", safetensors_bytes({{"other.weight", "F32", {3, 10}, f32_bytes(weight_values())}}));
  expect_clean_failure(prune_args({"--method", "gradient", "--grad", "g.safetensors"}), {"g.safetensors", kPruneWeight});
}

TEST_F(PruneErrors, MissingNormTensor) {
  write_file("a.safetensors", safetensors_bytes({{"other.weight", "F32", {10}, f32_bytes(std::vector<float>(10, 1.0f))}}));
  expect_clean_failure(prune_args({"--method", "wanda", "--act-norms", "a.safetensors"}), {"a.safetensors", kPruneWeight});
}

TEST_F(PruneErrors, GradientShapeMismatch) {
  write_file("g.safetensors", safetensors_bytes({{kPruneWeight, "F32", {10, 3}, f32_bytes(weight_values())}}));
  expect_clean_failure(prune_args({"--method", "gradient", "--grad", "g.safetensors"}),
                       {"g.safetensors", kPruneWeight, "[10, 3]", "[3, 10]"});
}

TEST_F(PruneErrors, NormLengthMismatch) {
  write_file("a.safetensors", safetensors_bytes({{kPruneWeight, "F32", {9}, f32_bytes(std::vector<float>(9, 1.0f))}}));
  expect_clean_failure(prune_args({"--method", "wanda", "--act-norms", "a.safetensors"}),
                       {"a.safetensors", kPruneWeight, "[9]", "[10]"});
}

TEST_F(PruneErrors, GradientMethodWithoutGradientFile) {
  expect_clean_failure(prune_args({"--method", "gradient"}), {"--grad"});
}

TEST_F(PruneErrors, GradientFileWithTheWrongMethod) {
  expect_clean_failure(prune_args({"--grad", "g.safetensors"}), {"--grad", "g.safetensors", "magnitude"});
}

TEST_F(PruneErrors, CorruptGradientFile) {
  write_file("g.safetensors", "not a safetensors file at all");
  expect_clean_failure(prune_args({"--method", "gradient", "--grad", "g.safetensors"}), {"g.safetensors"});
}

class InvalidPattern : public PruneErrors, public ::testing::WithParamInterface<const char*> {};

TEST_P(InvalidPattern, IsRejected) {
  expect_clean_failure(prune_args({"--pattern", GetParam()}), {"--pattern", std::string("'") + GetParam() + "'"});
}

INSTANTIATE_TEST_SUITE_P(CliPatterns, InvalidPattern,
                         ::testing::Values("4:2", "0:4", "2:0", "2:4:8", "abc", "2:2", "1:65", "", "-1:4", "2 :4"));

TEST_F(PruneErrors, UnknownMethod) {
  expect_clean_failure(prune_args({"--method", "random"}), {"--method", "random"});
}

TEST_F(PruneErrors, UnknownFormat) {
  expect_clean_failure(prune_args({"--format", "csr"}), {"--format", "csr"});
}

TEST_F(PruneErrors, Sparse24NeedsA24CompliantPattern) {
  expect_clean_failure(prune_args({"--format", "sparse24", "--pattern", "6:8"}), {"sparse24", "6:8"});
  expect_clean_failure(prune_args({"--format", "sparse24", "--pattern", "3:4"}), {"sparse24", "3:4"});
}

TEST_F(PruneErrors, InvalidRegex) {
  expect_clean_failure(prune_args({"--include", "layers.(0"}), {"--include", "layers.(0"});
  expect_clean_failure(prune_args({"--exclude", "[norm"}), {"--exclude", "[norm"});
}

TEST_F(PruneErrors, UnwritableReportLeavesNoOutput) {
  expect_clean_failure({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "2:4", "--report",
                        "no/such/folder/report.json"},
                       {"no/such/folder/report.json"});
}

TEST_F(PruneErrors, UnwritableOutput) {
  expect_clean_failure({"prune", "in.safetensors", "-o", "no/such/folder/out.safetensors", "--pattern", "2:4"},
                       {"no/such/folder/out.safetensors"});
}

TEST_F(PruneErrors, FailureLeavesAnExistingOutputUntouched) {
  write_file("out.safetensors", "previous contents");
  auto values = weight_values();
  values[0] = std::numeric_limits<float>::quiet_NaN();
  write_input(values);
  expect_clean_failure(prune_args({}), {kPruneWeight, "nan"});
  EXPECT_EQ(read_file("out.safetensors"), "previous contents");
}

}  // namespace
}  // namespace nmkit::cli_test
