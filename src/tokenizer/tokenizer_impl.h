// Tokenizer internals (not public API): the vocabulary's lookup tables shared by every tokenizer
// model, and the interface each model implements (docs/design.md 11.3): byte-level BPE
// (byte_pair.cc, tokenizer.ggml.model "gpt2") and SentencePiece BPE (sentencepiece.cc, "llama").
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "nmkit/tokenizer.h"

namespace nmkit {

// Hash that lets an unordered_map<std::string, ...> be searched with a string_view (C++20
// heterogeneous lookup), so pieces are looked up without copies.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIndex = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// The vocabulary as every tokenizer model reads it.
struct Vocabulary {
  TokenizerVocab vocab;
  TokenIndex token_index;

  int32_t find(std::string_view text) const {
    auto it = token_index.find(text);
    return it == token_index.end() ? -1 : it->second;
  }
  TokenType type(int32_t id) const {
    return vocab.token_types.empty() ? TokenType::kNormal : static_cast<TokenType>(vocab.token_types[id]);
  }
};

// One tokenizer model: how a run of text holding no special token becomes ids, and what a normal or
// byte token decodes to. Built over a Vocabulary that outlives it.
class TokenizerModel {
 public:
  virtual ~TokenizerModel() = default;
  // Appends the ids of `text`; `after_special`: the text starts the input or follows a special token.
  // Fails only on an internal regex failure (resource limits).
  virtual Status encode(std::string_view text, bool after_special, std::vector<int32_t>& out) const = 0;
  // The bytes a normal or byte token (type) decodes to; "" where it decodes to nothing.
  virtual std::string piece(int32_t id, TokenType type) const = 0;
  // Text is read as code points, invalid UTF-8 bytes as U+FFFD (tokenizer.h).
  virtual bool reads_code_points() const = 0;
  // decode drops the space that encode put before the text (SentencePiece's add_space_prefix).
  virtual bool strips_leading_space() const = 0;
};

// "gpt2": an Error for a pre type the build does not know or merges that name no tokens.
Result<std::unique_ptr<TokenizerModel>> make_byte_pair_model(const Vocabulary& v);
// "llama".
std::unique_ptr<TokenizerModel> make_sentencepiece_model(const Vocabulary& v);

struct Tokenizer::Impl : Vocabulary {
  std::unique_ptr<TokenizerModel> model;
  std::vector<std::string> pieces;     // id -> bytes it decodes to
  std::vector<int32_t> special_order;  // tokens matched in text, longest first
  std::unordered_set<int32_t> eog;
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
// 'text' for messages: control bytes escaped, cut after 40 bytes.
std::string quoted(std::string_view text);
// Byte of a "<0xNN>" token (SentencePiece byte fallback), or -1.
int byte_of_fallback_token(std::string_view text);
}  // namespace tokenizer_detail

}  // namespace nmkit
