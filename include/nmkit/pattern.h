// N:M patterns, written keep:group ("2:4", "6:8"): at most `keep` non-zeros in every run of `group`
// consecutive elements along K of one row (docs/design.md section 1).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "nmkit/status.h"

namespace nmkit {

struct Pattern {
  int keep = 2;
  int group = 4;

  static constexpr int kMaxGroup = 64;

  // Parses "keep:group" with 1 <= keep < group <= 64; anything else is an Error quoting the text.
  static Result<Pattern> parse(std::string_view text);
  static Result<Pattern> make(int keep, int group);

  std::string str() const { return std::to_string(keep) + ":" + std::to_string(group); }
  // Groups per row of K >= 0 elements, the tail group included (no K + group - 1, which would
  // overflow for K near 2^63).
  int64_t groups(int64_t K) const { return K / group + (K % group != 0 ? 1 : 0); }
  // K rounded up to whole groups.
  int64_t padded(int64_t K) const { return groups(K) * group; }
  // Even group and keep <= group - 2: slides onto 2:4 windows (docs/design.md section 5).
  bool slidable() const { return group % 2 == 0 && keep <= group - 2; }
  // N of the (2N-2):2N family, for even groups.
  int N() const { return group / 2; }

  bool operator==(const Pattern&) const = default;
};

}  // namespace nmkit
