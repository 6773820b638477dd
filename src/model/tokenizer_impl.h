// Tokenizer internals shared by the tokenizer_*.cc files (not public API).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/tokenizer_pretokenize.h"
#include "nmkit/tokenizer.h"

namespace nmkit {

// Hash that lets an unordered_map<std::string, ...> be searched with a string_view (C++20
// heterogeneous lookup), so pieces are looked up without copies.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIndex = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Tokenizer::Impl {
  TokenizerVocab vocab;
  bool is_gpt2 = false;  // else "llama" (SentencePiece BPE)
  TokenIndex token_index;
  std::vector<std::string> pieces;     // id -> bytes it decodes to
  std::vector<int32_t> special_order;  // tokens matched in text, longest first
  std::unordered_set<int32_t> eog;

  // gpt2: GPT-2's bytes_to_unicode table (byte -> UTF-8 of its stand-in code point), the token of
  // each single byte, and merges keyed by (left id, right id).
  std::array<std::string, 256> byte_chars;
  std::array<int32_t, 256> byte_tokens{};
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  std::unordered_map<uint64_t, Merge> merges;
  tokenizer_detail::PreTokenizer pre_tokenizer;

  // llama: the <0xNN> byte-fallback tokens (-1 where absent).
  std::array<int32_t, 256> fallback_tokens{};

  int32_t find(std::string_view text) const {
    auto it = token_index.find(text);
    return it == token_index.end() ? -1 : it->second;
  }
  TokenType type(int32_t id) const {
    return vocab.token_types.empty() ? TokenType::kNormal
                                     : static_cast<TokenType>(vocab.token_types[id]);
  }

  void encode_gpt2(std::string_view text, std::vector<int32_t>& out,
                   std::vector<tokenizer_detail::Piece>& scratch, Status& status) const;
  void encode_spm(std::string_view text, std::vector<int32_t>& out) const;
};

namespace tokenizer_detail {
// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes map
// in order to U+0100... Returns the code point of each byte.
std::array<uint32_t, 256> gpt2_byte_code_points();
void append_utf8(uint32_t code_point, std::string& out);
// Copies text with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD.
std::string sanitize_utf8(std::string_view text);
// Length of the valid UTF-8 sequence at text[i], or 0 if it is invalid.
size_t valid_utf8_length(std::string_view text, size_t i);
}  // namespace tokenizer_detail

}  // namespace nmkit
