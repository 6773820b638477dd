// The byte-level BPE pre-tokenizer: splits text into pieces with the regex sequence of a
// `tokenizer.ggml.pre` type (docs/design.md section 11.3), through PCRE2 with UTF + UCP so the
// Unicode classes come from PCRE2's tables.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/status.h"

namespace nmkit::tokenizer_detail {

// One piece of the text: [begin, begin + size) in bytes.
struct Piece {
  size_t begin;
  size_t size;
};

class PreTokenizer {
 public:
  // Fails for a pre type this build does not know, naming the supported ones.
  static Result<PreTokenizer> create(const std::string& pre);
  static std::vector<std::string> supported();

  // Splits valid UTF-8 text. Each regex in turn splits every current piece into its matches and
  // the text between them (both kept, in order), as llama.cpp's unicode_regex_split and the
  // `tokenizers` Split(behavior="isolated") do; a regex only sees its piece, so lookaheads stop at
  // the piece's end.
  Status split(std::string_view text, std::vector<Piece>& pieces) const;

  // llama3-style vocabularies look a whole piece up before merging (llama.cpp's ignore_merges).
  bool ignore_merges() const { return ignore_merges_; }

  struct Regex;  // a compiled PCRE2 pattern

 private:
  std::vector<std::shared_ptr<const Regex>> regexes_;
  bool ignore_merges_ = false;
};

}  // namespace nmkit::tokenizer_detail
