#include "tests/cli/cli_harness.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nmkit/dtype.h"

#ifndef NMKIT_CLI_PATH
#error "NMKIT_CLI_PATH must name the built nmkit executable"
#endif

namespace nmkit::cli_test {
namespace {

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

template <class T>
void append(std::string& out, T value) {
  char buffer[sizeof(T)];
  std::memcpy(buffer, &value, sizeof(T));
  out.append(buffer, sizeof(T));
}

}  // namespace

std::string f32_bytes(const std::vector<float>& values) {
  std::string out;
  for (float v : values) append(out, v);
  return out;
}

std::string f16_bytes(const std::vector<float>& values) {
  std::string out;
  for (float v : values) {
    const uint16_t h = f32_to_f16(v);
    EXPECT_EQ(f16_to_f32(h), v) << "test value not exact in f16";
    append(out, h);
  }
  return out;
}

std::string bf16_bytes(const std::vector<float>& values) {
  std::string out;
  for (float v : values) {
    const uint16_t h = f32_to_bf16(v);
    EXPECT_EQ(bf16_to_f32(h), v) << "test value not exact in bf16";
    append(out, h);
  }
  return out;
}

std::string bytes_in(const std::string& dtype, const std::vector<float>& values) {
  if (dtype == "F16") return f16_bytes(values);
  if (dtype == "BF16") return bf16_bytes(values);
  return f32_bytes(values);
}

nlohmann::json header_of(const std::vector<RawTensor>& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  return header;
}

std::string data_of(const std::vector<RawTensor>& tensors) {
  std::string data;
  for (const auto& t : tensors) data += t.bytes;
  return data;
}

std::string safetensors_bytes(const std::string& header_text, const std::string& data) {
  std::string out;
  append(out, static_cast<uint64_t>(header_text.size()));
  return out + header_text + data;
}

std::string safetensors_bytes(const std::vector<RawTensor>& tensors, const std::map<std::string, std::string>& metadata) {
  return safetensors_bytes(header_of(tensors, metadata).dump(), data_of(tensors));
}

void CliTest::SetUp() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  std::replace(name.begin(), name.end(), '/', '_');
  const auto base = std::filesystem::temp_directory_path() / "nmkit_cli_test";
  std::filesystem::create_directories(base);
  std::string templ = (base / (name + ".XXXXXX")).string();
  ASSERT_NE(mkdtemp(templ.data()), nullptr);
  dir_ = templ;
}

void CliTest::TearDown() {
  if (!HasFailure()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  } else {
    std::printf("scratch folder kept: %s\n", dir_.c_str());
  }
}

void CliTest::write_file(const std::string& name, const std::string& bytes) const {
  std::ofstream file(path(name), std::ios::binary);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(file.good()) << path(name);
}

std::string CliTest::read_file(const std::string& name) const {
  std::ifstream file(path(name), std::ios::binary);
  std::stringstream buffer;
  buffer << file.rdbuf();
  return buffer.str();
}

bool CliTest::exists(const std::string& name) const { return std::filesystem::exists(path(name)); }

std::vector<std::string> CliTest::listing() const {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::map<std::string, size_t> CliTest::snapshot() const {
  std::map<std::string, size_t> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    const std::string name = entry.path().filename().string();
    // A symlink is recorded by its target text, so replacing the link itself shows too.
    files[name] = entry.is_symlink() ? std::hash<std::string>{}("link:" + std::filesystem::read_symlink(entry.path()).string())
                                     : std::hash<std::string>{}(read_file(name));
  }
  return files;
}

RunResult CliTest::run(const std::vector<std::string>& args) const {
  // Appended piecewise: `" " + std::string&&` trips GCC 12's -Wrestrict false positive.
  std::string command = "cd ";
  command += shell_quote(dir_);
  command += " && ";
  command += shell_quote(NMKIT_CLI_PATH);
  for (const auto& a : args) {
    command += ' ';
    command += shell_quote(a);
  }
  const std::string out_path = dir_ + ".stdout";
  const std::string err_path = dir_ + ".stderr";
  command += " >";
  command += shell_quote(out_path);
  command += " 2>";
  command += shell_quote(err_path);
  command += " </dev/null";
  const int status = std::system(command.c_str());
  RunResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const auto slurp = [](const std::string& p) {
    std::ifstream file(p, std::ios::binary);
    std::stringstream buffer;
    buffer << file.rdbuf();
    return buffer.str();
  };
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return result;
}

void CliTest::expect_clean_failure(const std::vector<std::string>& args, const std::vector<std::string>& needles) const {
  const auto before = snapshot();
  const RunResult r = run(args);
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  SCOPED_TRACE("nmkit " + joined);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "crashed";
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
  EXPECT_EQ(r.err.back(), '\n');
  EXPECT_EQ(r.err.rfind("nmkit: ", 0), 0u) << "stderr: " << r.err;
  for (const auto& needle : needles) EXPECT_NE(r.err.find(needle), std::string::npos) << "missing '" << needle << "' in: " << r.err;
  const auto after = snapshot();
  EXPECT_EQ(after.size(), before.size()) << "a file appeared or vanished (output, report or temporary left behind)";
  for (const auto& [name, hash] : before) {
    const auto it = after.find(name);
    if (it == after.end()) {
      ADD_FAILURE() << name << " was removed";
    } else {
      EXPECT_EQ(it->second, hash) << name << " changed";
    }
  }
  for (const auto& [name, hash] : after) EXPECT_TRUE(before.count(name)) << name << " appeared";
}

}  // namespace nmkit::cli_test
