// Helpers for the io suite: a temporary folder, a safetensors writer that builds files byte by byte
// (independent of write_safetensors), and a minimal JSON reader (independent of nlohmann::json) to
// parse what write_safetensors produced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace nmkit::test {

// A fresh folder under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::vector<std::string> entries() const;  // names in the folder, sorted

 private:
  std::string path_;
};

std::vector<uint8_t> read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

// 8-byte little-endian length of `header`, `header` verbatim, then `data`.
std::vector<uint8_t> hand_file(const std::string& header, const std::vector<uint8_t>& data);
// Same, with the length prefix given explicitly (for lying prefixes).
std::vector<uint8_t> hand_file_with_length(uint64_t length, const std::string& header, const std::vector<uint8_t>& data);

// A tiny JSON value: enough for safetensors headers (objects keep their key order).
struct Json {
  enum class Kind { Null, Bool, Int, String, Array, Object } kind = Kind::Null;
  bool boolean = false;
  int64_t integer = 0;
  std::string string;
  std::vector<Json> items;                                // Array
  std::vector<std::pair<std::string, Json>> members;      // Object, in file order
  const Json* get(const std::string& key) const;          // Object member or nullptr
};
// Parses integers (no fractions/exponents), strings with \" \\ \/ \n \t \uXXXX (BMP) escapes,
// arrays, objects, true/false/null. Returns false on anything else.
bool parse_json(const std::string& text, Json& out);

}  // namespace nmkit::test
