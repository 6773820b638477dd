// Issue 13 as a hostile user tries it from the command line: huge and control-character names (C2,
// M3-M5), slid and corrupt compressed inputs to prune (W1, W5), inspect on rows narrower than a
// pattern's group (M6). Each bad input: exit 1, one line naming file, tensor and value, no file in
// the folder changed and no temporary left (expect_clean_failure).
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_harness.h"

namespace nmkit::cli_test {
namespace {

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
  return v;
}

nlohmann::json inspect_json(const CliTest& test, const RunResult& r) {
  (void)test;
  return nlohmann::json::parse(r.out)["tensors"];
}

class HostileInput : public CliTest {};

// C2: before, std::regex overflowed its stack on a 50k-character name (SIGSEGV). The reader now
// refuses names over 4096 bytes; up to that, RE2 matches in linear time.
TEST_F(HostileInput, HugeNameWithARegexFilter) {
  write_file("in.safetensors", safetensors_bytes({{std::string(50'000, 'a') + "weight", "F32", {2, 4}, f32_bytes(ramp(8))}}));
  expect_clean_failure({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "2:4", "--include", ".*weight"},
                       {"in.safetensors", "50006 bytes exceeds the limit of 4096"});
  write_file("ok.safetensors", safetensors_bytes({{std::string(4000, 'a') + "weight", "F32", {2, 4}, f32_bytes(ramp(8))}}));
  const RunResult r = run({"prune", "ok.safetensors", "-o", "out.safetensors", "--pattern", "2:4", "--include",
                           "(a|aa)*.*weight"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("pruned 1 tensors"), std::string::npos) << r.out;
}

// M3/M4: names reach the terminal escaped and cut: no raw control character in the table or the
// error line, no line longer than a few hundred bytes.
TEST_F(HostileInput, ControlCharactersAndLongNamesAreShownEscapedAndCut) {
  const std::string evil = "evil\x1b[2J\nname\r" + std::string(3000, 'x');
  write_file("in.safetensors", safetensors_bytes({{evil, "F32", {2, 4}, f32_bytes(ramp(8))}}));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"inspect", "in.safetensors"},
        std::vector<std::string>{"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "2:4"}}) {
    const RunResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
    EXPECT_EQ(r.out.find('\r'), std::string::npos);
    EXPECT_NE(r.out.find("evil\\x1B[2J\\x0Aname\\x0D"), std::string::npos) << r.out;
    size_t longest = 0, start = 0;
    for (size_t at = r.out.find('\n'); at != std::string::npos; start = at + 1, at = r.out.find('\n', start)) {
      longest = std::max(longest, at - start);
    }
    EXPECT_LT(longest, 600u);
  }
  // In an error line too (linear with --weight naming a tensor that is not there).
  write_file("x.safetensors", safetensors_bytes({{"x", "F32", {2, 4}, f32_bytes(ramp(8))}}));
  expect_clean_failure({"linear", "in.safetensors", "x.safetensors", "--weight", evil + "?", "-o", "y.safetensors"},
                       {"in.safetensors: no tensor 'evil\\x1B[2J\\x0Aname\\x0D"});
}

// M5: a tensor named "" is copied like any other (it used to fail blaming the output file).
TEST_F(HostileInput, EmptyTensorNameIsCopied) {
  write_file("in.safetensors", safetensors_bytes({{"", "F32", {4}, f32_bytes(ramp(4))},
                                                  {"w", "F32", {2, 4}, f32_bytes(ramp(8))}}));
  const RunResult r = run({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "2:4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const RunResult i = run({"inspect", "out.safetensors", "--json"});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_EQ(inspect_json(*this, i)[0]["name"], "");
}

// W1: a slid checkpoint stored dense is not re-pruned as a plain [rows, K'] weight: prune copies it
// with its slide record, so linear still runs it on the original X.
TEST_F(HostileInput, PruneKeepsSlidWeights) {
  std::vector<float> w(4 * 16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = (i % 8 < 6) ? static_cast<float>(i % 5 + 1) : 0.0f;  // 6:8
  write_file("in.safetensors", safetensors_bytes({{"w", "F32", {4, 16}, f32_bytes(w)}}));
  ASSERT_EQ(run({"slide", "in.safetensors", "-o", "slid.safetensors", "--pattern", "6:8"}).exit_code, 0);
  const RunResult p = run({"prune", "slid.safetensors", "-o", "again.safetensors", "--pattern", "2:4"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(read_file("again.safetensors"), read_file("slid.safetensors"));
  write_file("x.safetensors", safetensors_bytes({{"x", "F32", {2, 16}, f32_bytes(ramp(32))}}));
  const RunResult l = run({"linear", "again.safetensors", "x.safetensors", "-o", "y.safetensors"});
  EXPECT_EQ(l.exit_code, 0) << l.err;
}

// W5: a compressed weight with invalid metadata (nibble 0xF: both indices 3) is refused by prune as
// by inspect, instead of being copied.
TEST_F(HostileInput, PruneValidatesCopiedCompressedWeights) {
  write_file("in.safetensors", safetensors_bytes({{"w", "F32", {2, 8}, f32_bytes(ramp(16))}}));
  ASSERT_EQ(run({"prune", "in.safetensors", "-o", "s24.safetensors", "--pattern", "2:4", "--format", "sparse24"}).exit_code,
            0);
  std::string bytes = read_file("s24.safetensors");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const auto header = nlohmann::json::parse(bytes.substr(8, header_len));
  const uint64_t meta = 8 + header_len + header["w.meta"]["data_offsets"][0].get<uint64_t>();
  bytes[meta] = '\xFF';
  write_file("bad.safetensors", bytes);
  expect_clean_failure({"inspect", "bad.safetensors"}, {"bad.safetensors", "w"});
  expect_clean_failure({"prune", "bad.safetensors", "-o", "out.safetensors", "--pattern", "2:4"},
                       {"bad.safetensors", "w"});
}

// M6: rows narrower than a pattern's group have no full group; such patterns are not claimed.
TEST_F(HostileInput, InspectIgnoresPatternsWiderThanTheRow) {
  write_file("in.safetensors", safetensors_bytes({{"ones", "F32", {4, 8}, f32_bytes(std::vector<float>(32, 1.0f))}}));
  const RunResult r = run({"inspect", "in.safetensors", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(inspect_json(*this, r)[0]["sparsest_pattern"].is_null()) << r.out;
}

}  // namespace
}  // namespace nmkit::cli_test
