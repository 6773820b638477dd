// End-to-end harness for the nmkit command line: hand-built safetensors files (so corrupt ones can be
// made on purpose), a scratch folder per test, and a runner that captures exit code, stdout and stderr.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace nmkit::cli_test {

// One tensor as raw bytes; dtype is the safetensors spelling ("F32", "BF16", ...).
struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::string f32_bytes(const std::vector<float>& values);
std::string f16_bytes(const std::vector<float>& values);   // values must be exact in f16
std::string bf16_bytes(const std::vector<float>& values);  // values must be exact in bf16
std::string bytes_in(const std::string& dtype, const std::vector<float>& values);

// The header a writer would produce (offsets back to back) and the data section.
nlohmann::json header_of(const std::vector<RawTensor>& tensors, const std::map<std::string, std::string>& metadata = {});
std::string data_of(const std::vector<RawTensor>& tensors);
// 8-byte little-endian length + header text + data, exactly as given (no checks: tests corrupt them).
std::string safetensors_bytes(const std::string& header_text, const std::string& data);
std::string safetensors_bytes(const std::vector<RawTensor>& tensors, const std::map<std::string, std::string>& metadata = {});

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  void write_file(const std::string& name, const std::string& bytes) const;
  std::string read_file(const std::string& name) const;
  bool exists(const std::string& name) const;
  // Names in the scratch folder, sorted (to spot leftover temporaries).
  std::vector<std::string> listing() const;
  // Every file in the scratch folder with a hash of its bytes (to prove inputs were not touched).
  std::map<std::string, size_t> snapshot() const;
  // Runs "nmkit ARGS" in the scratch folder; arguments are shell-quoted.
  RunResult run(const std::vector<std::string>& args) const;

  // The bad-input contract of the issue: non-zero exit, exactly one line "nmkit: ..." on stderr that
  // contains every `needles` entry, no file in the folder created, removed or changed (inputs are
  // hashed before and after; no output, no temporary, no report).
  void expect_clean_failure(const std::vector<std::string>& args, const std::vector<std::string>& needles) const;

 private:
  std::string dir_;
};

}  // namespace nmkit::cli_test
