// Tokenizer construction, special-token partition, encode/decode over the vocabulary's tokenizer
// model (docs/design.md section 11.3): byte_pair.cc (gpt2) and sentencepiece.cc (llama) implement
// TokenizerModel (tokenizer_impl.h).
#include <algorithm>
#include <cstdio>

#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer_impl.h"

namespace nmkit {
namespace {

// Texts llama.cpp's llama_vocab::impl::load marks as end of generation (EOT/EOM and FIM
// pad/repo/separator tokens, detected by text because GGUF files do not say).
constexpr const char* kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<|eom_id|>", "<EOT>", "</s>", "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>"};

bool renders_as_text(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUnknown ||
         type == TokenType::kUserDefined;
}

struct Fragment {
  int32_t token;  // >= 0: a special token; -1: raw text [begin, begin + size)
  size_t begin, size;
};

}  // namespace

namespace tokenizer_detail {

std::string quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text.substr(0, 40)) {
    if (static_cast<uint8_t>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<uint8_t>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + (text.size() > 40 ? "...'" : "'");
}

int byte_of_fallback_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    const int digit = (c >= '0' && c <= '9') ? c - '0'
                      : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                               : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace tokenizer_detail

std::optional<size_t> first_invalid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = tokenizer_detail::valid_utf8_length(text, i);
    if (length == 0) return i;
    i += length;
  }
  return std::nullopt;
}

std::vector<std::string> Tokenizer::supported_pre_types() {
  return tokenizer_detail::PreTokenizer::supported();
}

Result<Tokenizer> Tokenizer::create(TokenizerVocab vocab) {
  auto impl = std::make_shared<Impl>();
  if (vocab.model != "gpt2" && vocab.model != "llama") {
    return Error("unsupported tokenizer.ggml.model '" + vocab.model +
                 "' (supported: gpt2, llama)");
  }
  const size_t n = vocab.tokens.size();
  if (n == 0) return Error("tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) return Error("tokenizer.ggml.tokens: too many tokens");
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    return Error("tokenizer.ggml.scores has " + std::to_string(vocab.scores.size()) +
                 " entries for " + std::to_string(n) + " tokens");
  }
  if (!vocab.token_types.empty() && vocab.token_types.size() != n) {
    return Error("tokenizer.ggml.token_type has " + std::to_string(vocab.token_types.size()) +
                 " entries for " + std::to_string(n) + " tokens");
  }
  for (size_t i = 0; i < vocab.token_types.size(); ++i) {
    if (vocab.token_types[i] < 0 || vocab.token_types[i] > 6) {
      return Error("tokenizer.ggml.token_type[" + std::to_string(i) + "] = " +
                   std::to_string(vocab.token_types[i]) + " is not a token type (0..6)");
    }
  }
  impl->token_index.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (vocab.tokens[i].empty()) return Error("token " + std::to_string(i) + " is empty");
    auto [it, inserted] = impl->token_index.emplace(vocab.tokens[i], static_cast<int32_t>(i));
    if (!inserted) {
      return Error("duplicate token " + tokenizer_detail::quoted(vocab.tokens[i]) + " at ids " +
                   std::to_string(it->second) + " and " + std::to_string(i));
    }
  }
  const std::pair<const char*, int32_t> specials[] = {
      {"bos", vocab.bos}, {"eos", vocab.eos}, {"unk", vocab.unk}, {"pad", vocab.pad}};
  for (const auto& [name, id] : specials) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return Error(std::string("tokenizer ") + name + " token id " + std::to_string(id) +
                   " is outside the vocabulary of " + std::to_string(n));
    }
  }
  if (vocab.add_bos && vocab.bos < 0) return Error("add_bos_token is true but there is no bos token");
  if (vocab.add_eos && vocab.eos < 0) return Error("add_eos_token is true but there is no eos token");
  impl->vocab = std::move(vocab);
  Impl& t = *impl;
  const TokenizerVocab& v = t.vocab;
  if (v.model == "gpt2") {
    auto model = make_byte_pair_model(t);
    if (!model.ok()) return model.error();
    t.model = std::move(model.value());
  } else {
    t.model = make_sentencepiece_model(t);
  }
  t.pieces.resize(n);
  for (size_t id = 0; id < n; ++id) {
    const TokenType type = t.type(static_cast<int32_t>(id));
    t.pieces[id] = renders_as_text(type) ? v.tokens[id] : t.model->piece(static_cast<int32_t>(id), type);
  }

  for (size_t id = 0; id < n; ++id) {
    if (renders_as_text(t.type(static_cast<int32_t>(id)))) {
      t.special_order.push_back(static_cast<int32_t>(id));
    }
  }
  std::stable_sort(t.special_order.begin(), t.special_order.end(), [&](int32_t a, int32_t b) {
    return v.tokens[a].size() > v.tokens[b].size();
  });
  if (v.eos >= 0) t.eog.insert(v.eos);
  for (const char* text : kEogTexts) {
    const int32_t id = t.find(text);
    if (id >= 0) t.eog.insert(id);
  }
  return Tokenizer(std::move(impl));
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view input, bool add_special,
                                               bool parse_special) const {
  const Impl& t = *impl_;
  // A model that reads code points gets invalid bytes as U+FFFD first (see tokenizer.h).
  std::string sanitized;
  std::string_view text = input;
  if (t.model->reads_code_points() && first_invalid_utf8(input).has_value()) {
    sanitized = tokenizer_detail::sanitize_utf8(input);
    text = sanitized;
  }

  // Special tokens written in the text, longest first, as llama.cpp's tokenizer_st_partition.
  std::vector<Fragment> fragments, next;
  if (!text.empty()) fragments.push_back({-1, 0, text.size()});
  for (int32_t id : t.special_order) {
    const TokenType type = t.type(id);
    if (!parse_special && type != TokenType::kUserDefined) continue;
    const std::string& special = t.vocab.tokens[id];
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view raw = text.substr(f.begin, f.size);
      size_t from = 0;
      for (size_t at; (at = raw.find(special, from)) != std::string_view::npos;) {
        if (at > from) next.push_back({-1, f.begin + from, at - from});
        next.push_back({id, 0, 0});
        from = at + special.size();
      }
      if (from < raw.size()) next.push_back({-1, f.begin + from, raw.size() - from});
    }
    fragments.swap(next);
  }

  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && t.vocab.add_bos) out.push_back(t.vocab.bos);
  bool after_special = true;
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    NMKIT_TRY(t.model->encode(text.substr(f.begin, f.size), after_special, out));
    after_special = false;
  }
  if (add_special && t.vocab.add_eos) out.push_back(t.vocab.eos);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  const Impl& t = *impl_;
  std::string out;
  // The space encode put before the text is dropped (llama.cpp's detokenize strips one leading
  // space from the first piece; a leading bos is skipped over).
  bool strip_space = t.model->strips_leading_space();
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= n_vocab()) continue;
    const std::string& piece = t.pieces[id];
    if (strip_space && !(i == 0 && id == t.vocab.bos)) {
      strip_space = false;
      if (!piece.empty() && piece[0] == ' ') {
        out.append(piece, 1);
        continue;
      }
    }
    out += piece;
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return "";
  return impl_->pieces[id];
}

int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->vocab.tokens.size()); }
int32_t Tokenizer::bos() const { return impl_->vocab.bos; }
int32_t Tokenizer::eos() const { return impl_->vocab.eos; }
int32_t Tokenizer::unk() const { return impl_->vocab.unk; }
int32_t Tokenizer::pad() const { return impl_->vocab.pad; }
bool Tokenizer::add_bos() const { return impl_->vocab.add_bos; }
bool Tokenizer::add_eos() const { return impl_->vocab.add_eos; }
bool Tokenizer::is_eog(int32_t id) const { return impl_->eog.count(id) > 0; }
int32_t Tokenizer::token_id(std::string_view text) const { return impl_->find(text); }
const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  return id < 0 || id >= n_vocab() ? kEmpty : impl_->vocab.tokens[id];
}
TokenType Tokenizer::token_type(int32_t id) const {
  return id < 0 || id >= n_vocab() ? TokenType::kUndefined : impl_->type(id);
}
const std::string& Tokenizer::model() const { return impl_->vocab.model; }
const std::string& Tokenizer::pre() const { return impl_->vocab.pre; }
const std::string& Tokenizer::chat_template() const { return impl_->vocab.chat_template; }
const TokenizerVocab& Tokenizer::vocab() const { return impl_->vocab; }

}  // namespace nmkit
