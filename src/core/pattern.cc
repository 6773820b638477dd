#include "nmkit/pattern.h"

#include <charconv>

namespace nmkit {
namespace {

// Parses a whole decimal number of 1-3 digits; anything else fails.
bool parse_small_int(std::string_view text, int& out) {
  if (text.empty() || text.size() > 3) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

Result<Pattern> Pattern::make(int keep, int group) {
  if (keep < 1 || group <= keep || group > kMaxGroup) {
    return Error(ErrorCode::InvalidArgument, "invalid pattern '" + std::to_string(keep) + ":" + std::to_string(group) +
                                                 "': need 1 <= keep < group <= " + std::to_string(kMaxGroup));
  }
  return Pattern{keep, group};
}

Result<Pattern> Pattern::parse(std::string_view text) {
  const auto colon = text.find(':');
  int keep = 0;
  int group = 0;
  if (colon == std::string_view::npos || !parse_small_int(text.substr(0, colon), keep) ||
      !parse_small_int(text.substr(colon + 1), group)) {
    return Error(ErrorCode::InvalidArgument,
                 "invalid pattern '" + std::string(text) + "': expected keep:group such as 2:4 or 6:8");
  }
  auto pattern = make(keep, group);
  if (!pattern.ok()) {
    return Error(ErrorCode::InvalidArgument,
                 "invalid pattern '" + std::string(text) + "': need 1 <= keep < group <= " + std::to_string(kMaxGroup));
  }
  return pattern;
}

}  // namespace nmkit
