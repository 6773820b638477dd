// Short, single-line renderings of names and JSON values for error messages (docs/design.md 10.1: one
// line naming the file, tensor and value, even when the value is huge or holds newlines).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nmkit::io {

// 'name' with control characters escaped as \xNN and long names cut with "...".
std::string quote_name(std::string_view name);
// `text` with control characters escaped, cut to at most `max_bytes` (plus "...").
std::string one_line(std::string_view text, size_t max_bytes);
// Compact JSON of `value`, nested containers elided beyond a small depth and length, so that a
// hostile header cannot make a message (or the recursion that renders it) large.
std::string brief(const nlohmann::json& value);

}  // namespace nmkit::io
