#include "io/text.h"

#include "nmkit/status.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace nmkit::io {
namespace {

constexpr size_t kMaxValueBytes = 120;
constexpr size_t kMaxItems = 8;
constexpr int kMaxDepth = 3;

void render(const nlohmann::json& value, int depth, std::string& out) {
  if (out.size() > kMaxValueBytes) return;
  if (value.is_array()) {
    if (depth >= kMaxDepth) {
      out += "[...]";
      return;
    }
    out += '[';
    size_t i = 0;
    for (const auto& item : value) {
      if (i > 0) out += ", ";
      if (i == kMaxItems) {
        out += "...";
        break;
      }
      render(item, depth + 1, out);
      ++i;
    }
    out += ']';
  } else if (value.is_object()) {
    if (depth >= kMaxDepth) {
      out += "{...}";
      return;
    }
    out += '{';
    size_t i = 0;
    for (const auto& [key, item] : value.items()) {
      if (i > 0) out += ", ";
      if (i == kMaxItems) {
        out += "...";
        break;
      }
      out += nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      out += ": ";
      render(item, depth + 1, out);
      ++i;
    }
    out += '}';
  } else {
    out += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

}  // namespace

std::string one_line(std::string_view text, size_t max_bytes) { return printable_line(text, max_bytes); }

std::string quote_name(std::string_view name) { return nmkit::quote_name(name); }

std::string brief(const nlohmann::json& value) {
  std::string out;
  render(value, 0, out);
  return one_line(out, kMaxValueBytes + 40);
}

}  // namespace nmkit::io
