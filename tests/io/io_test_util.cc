#include "tests/io/io_test_util.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace nmkit::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/nmkit_io_test.XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::string> TempDir::entries() const {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> hand_file_with_length(uint64_t length, const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(length >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> hand_file(const std::string& header, const std::vector<uint8_t>& data) {
  return hand_file_with_length(header.size(), header, data);
}

const Json* Json::get(const std::string& key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

struct Reader {
  const std::string& s;
  size_t i = 0;

  void skip() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) ++i;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s.compare(i, w.size(), w) != 0) return false;
    i += w.size();
    return true;
  }
  bool string(std::string& out) {
    if (i >= s.size() || s[i] != '"') return false;
    ++i;
    while (i < s.size() && s[i] != '"') {
      if (s[i] != '\\') {
        out += s[i++];
        continue;
      }
      if (++i >= s.size()) return false;
      const char c = s[i++];
      if (c == '"' || c == '\\' || c == '/') out += c;
      else if (c == 'n') out += '\n';
      else if (c == 't') out += '\t';
      else if (c == 'r') out += '\r';
      else if (c == 'b') out += '\b';
      else if (c == 'f') out += '\f';
      else if (c == 'u') {
        if (i + 4 > s.size()) return false;
        const unsigned code = static_cast<unsigned>(std::stoul(s.substr(i, 4), nullptr, 16));
        i += 4;
        if (code < 0x80) {
          out += static_cast<char>(code);
        } else if (code < 0x800) {
          out += static_cast<char>(0xC0 | code >> 6);
          out += static_cast<char>(0x80 | (code & 0x3F));
        } else {
          out += static_cast<char>(0xE0 | code >> 12);
          out += static_cast<char>(0x80 | (code >> 6 & 0x3F));
          out += static_cast<char>(0x80 | (code & 0x3F));
        }
      } else {
        return false;
      }
    }
    if (i >= s.size()) return false;
    ++i;
    return true;
  }
  bool value(Json& out) {
    skip();
    if (i >= s.size()) return false;
    const char c = s[i];
    if (c == '{') {
      out.kind = Json::Kind::Object;
      ++i;
      skip();
      if (i < s.size() && s[i] == '}') return ++i, true;
      while (true) {
        skip();
        std::string key;
        if (!string(key)) return false;
        skip();
        if (i >= s.size() || s[i++] != ':') return false;
        Json v;
        if (!value(v)) return false;
        out.members.emplace_back(std::move(key), std::move(v));
        skip();
        if (i >= s.size()) return false;
        if (s[i] == ',') { ++i; continue; }
        if (s[i] == '}') return ++i, true;
        return false;
      }
    }
    if (c == '[') {
      out.kind = Json::Kind::Array;
      ++i;
      skip();
      if (i < s.size() && s[i] == ']') return ++i, true;
      while (true) {
        Json v;
        if (!value(v)) return false;
        out.items.push_back(std::move(v));
        skip();
        if (i >= s.size()) return false;
        if (s[i] == ',') { ++i; continue; }
        if (s[i] == ']') return ++i, true;
        return false;
      }
    }
    if (c == '"') {
      out.kind = Json::Kind::String;
      return string(out.string);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      out.kind = Json::Kind::Int;
      const bool negative = c == '-';
      if (negative) ++i;
      if (i >= s.size() || s[i] < '0' || s[i] > '9') return false;
      uint64_t v = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') v = v * 10 + static_cast<uint64_t>(s[i++] - '0');
      out.integer = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
      return i >= s.size() || (s[i] != '.' && s[i] != 'e' && s[i] != 'E');
    }
    if (literal("true")) { out.kind = Json::Kind::Bool; out.boolean = true; return true; }
    if (literal("false")) { out.kind = Json::Kind::Bool; return true; }
    if (literal("null")) { out.kind = Json::Kind::Null; return true; }
    return false;
  }
};

}  // namespace

bool parse_json(const std::string& text, Json& out) {
  Reader reader{text};
  if (!reader.value(out)) return false;
  reader.skip();
  return reader.i == text.size();
}

}  // namespace nmkit::test
