// Text <-> token ids for the models nmkit runs (docs/design.md section 11.3): GPT-2 byte-level BPE
// (`tokenizer.ggml.model = "gpt2"`) with llama.cpp's pre-tokenizer regexes, and SentencePiece-style
// BPE with scores and byte fallback (`"llama"`). The goal is ids equal to llama.cpp's for the same
// vocabulary and text; the tests check them against the PyPI `tokenizers` and `sentencepiece`
// packages built from the same vocabulary.
//
// Invalid UTF-8: for "gpt2" every byte that does not start a valid UTF-8 sequence is read as
// U+FFFD, as llama.cpp does for lone continuation bytes, truncated sequences and leads F8..FF (the
// tests compare the ids with llama-tokenize's). Stricter than llama.cpp: overlong forms (C0 80),
// surrogates (ED A0 80) and code points above U+10FFFF are invalid here too, where llama.cpp
// decodes the first two to their code points (C0 80 becomes NUL) and aborts on the third.
// decode(encode(t)) == t therefore holds only for valid UTF-8; first_invalid_utf8 finds the
// offending byte for callers that prefer an error. For "llama" the bytes go through byte
// fallback tokens (<0xNN>) unchanged, so decode restores them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/status.h"

namespace nmkit {

class GgufFile;

// Token types, numbered as GGUF's tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,       // special tokens such as <|im_start|>: matched in text only with parse_special
  kUserDefined = 4,   // always matched in text, before the pre-tokenizer runs
  kUnused = 5,
  kByte = 6,          // SentencePiece byte fallback <0xNN>
};

// Everything a tokenizer is built from, as a GGUF file stores it (keys tokenizer.ggml.*).
struct TokenizerVocab {
  std::string model;                 // "gpt2" (byte-level BPE) | "llama" (SentencePiece BPE)
  std::string pre;                   // gpt2 pre-tokenizer: see Tokenizer::supported_pre_types()
  std::vector<std::string> tokens;   // id -> text (byte-level alphabet for gpt2, '▁' for llama)
  std::vector<float> scores;         // llama: merge priority (higher merges first); may be empty
  std::vector<int32_t> token_types;  // TokenType values; empty = all normal
  std::vector<std::string> merges;   // gpt2: "left right", rank = position (lowest merges first)
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;  // -1 = none
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = true;      // llama only: a '▁' before the text and after each special
  std::string chat_template;         // tokenizer.chat_template (Jinja source), may be empty
};

class Tokenizer {
 public:
  // Validates the vocabulary (sizes agree, no duplicate or empty token, ids in range, merges name
  // tokens, a known model and pre type) and builds the lookup tables.
  static Result<Tokenizer> create(TokenizerVocab vocab);
  // From a GGUF file's tokenizer.ggml.* keys and tokenizer.chat_template.
  static Result<Tokenizer> from_gguf(const GgufFile& file);
  // From a Hugging Face tokenizer.json (a BPE model; the ByteLevel pre-tokenizer forms of smollm,
  // gpt2 and llama3, or the SentencePiece '▁' form); tokenizer_config.json next to it, when
  // present, supplies bos/eos, add_bos_token/add_eos_token and chat_template.
  static Result<Tokenizer> from_hf_json(const std::string& tokenizer_json_path);

  // add_special: prepend bos / append eos as add_bos()/add_eos() say. parse_special: control
  // tokens written in the text (e.g. "<|im_start|>") become their ids; user-defined tokens are
  // always matched. Fails only on an internal regex failure (resource limits), named in the error.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special,
                                      bool parse_special) const;
  // Concatenated pieces; control tokens are rendered as their text. For "llama" with
  // add_space_prefix, the first token's leading space is dropped (the one encode added). No
  // clean-up of spaces before punctuation (llama.cpp's clean_spaces for some pre types), so
  // decode(encode(t)) == t. Out-of-range ids decode to nothing.
  std::string decode(std::span<const int32_t> ids) const;
  // The bytes one token stands for (may be part of a UTF-8 character); "" for an invalid id.
  std::string token_to_piece(int32_t id) const;

  int32_t n_vocab() const;
  int32_t bos() const;
  int32_t eos() const;
  int32_t unk() const;
  int32_t pad() const;
  bool add_bos() const;
  bool add_eos() const;
  // End of generation: eos, and (as llama.cpp detects them by text) <|im_end|>, <|endoftext|>,
  // <|eot_id|>, <|end|>, <end_of_turn>, <|end_of_text|>, </s> and the FIM pad/repo/file-separator
  // tokens.
  bool is_eog(int32_t id) const;
  // Id of a token by its exact text, or -1.
  int32_t token_id(std::string_view text) const;
  const std::string& token_text(int32_t id) const;  // "" for an invalid id
  TokenType token_type(int32_t id) const;
  const std::string& model() const;
  const std::string& pre() const;
  const std::string& chat_template() const;

  static std::vector<std::string> supported_pre_types();

  struct Impl;  // opaque: defined in src/model (shared by copies: a Tokenizer is immutable)

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Byte offset of the first byte that does not begin a valid UTF-8 sequence, or nullopt.
std::optional<size_t> first_invalid_utf8(std::string_view text);

// Chat templating for `nmkit generate --chat`. Supported: ChatML templates (those containing
// "<|im_start|>", e.g. SmolLM2's), rendered as
//   <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
// with the template's default system message (the text between "<|im_start|>system\n" and the
// next "<|im_end|>" inside the template) prepended when the first message is not a system one.
// Any other template is an error naming what is supported.
struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};
Result<std::string> apply_chat_template(std::string_view chat_template,
                                        std::span<const ChatMessage> messages,
                                        bool add_generation_prompt);

}  // namespace nmkit
