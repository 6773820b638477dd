// SentencePiece-style BPE (`tokenizer.ggml.model = "llama"`, docs/design.md section 11.3): spaces
// become U+2581 '▁', the text starts as one symbol per UTF-8 character, and the adjacent pair
// whose concatenation is the vocabulary token of highest score merges first (leftmost among
// equal scores), as sentencepiece's bpe_model and llama.cpp's llm_tokenizer_spm do. Characters
// left without a token go out as <0xNN> byte-fallback tokens.
#include <memory>
#include <queue>

#include "tokenizer/tokenizer_impl.h"

namespace nmkit {
namespace {

struct Piece {
  size_t begin, size;  // bytes of the escaped text; size 0 = merged away
  int32_t prev, next;
};

struct Merge {
  float score;
  int32_t left, right;
  size_t size;  // left.size + right.size when queued: a different sum means it is stale
};

// Highest score first, then leftmost (llama.cpp's llm_bigram_spm comparator).
struct LaterMerge {
  bool operator()(const Merge& a, const Merge& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// UTF-8 sequence length from the lead byte's high nibble, without validation: an invalid byte
// forms a "character" that no token matches and so goes out through byte fallback unchanged.
size_t lead_length(char c) {
  static constexpr size_t kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLength[static_cast<uint8_t>(c) >> 4];
}

// SentencePiece BPE with scores and byte fallback.
class SentencePieceModel final : public TokenizerModel {
 public:
  explicit SentencePieceModel(const Vocabulary& v) : v_(v) {
    fallback_tokens_.fill(-1);
    for (size_t id = 0; id < v.vocab.tokens.size(); ++id) {
      const int byte = tokenizer_detail::byte_of_fallback_token(v.vocab.tokens[id]);
      if (byte >= 0 && fallback_tokens_[byte] < 0) fallback_tokens_[byte] = static_cast<int32_t>(id);
    }
  }
  Status encode(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;
  std::string piece(int32_t id, TokenType type) const override;
  bool reads_code_points() const override { return false; }  // bytes go through byte fallback as they are
  bool strips_leading_space() const override { return v_.vocab.add_space_prefix; }

 private:
  int32_t find(std::string_view text) const { return v_.find(text); }
  void encode_text(std::string_view fragment, std::vector<int32_t>& out) const;

  const Vocabulary& v_;
  std::array<int32_t, 256> fallback_tokens_{};  // the <0xNN> byte-fallback tokens (-1 where absent)
};

std::string SentencePieceModel::piece(int32_t id, TokenType type) const {
  const std::string& text = v_.vocab.tokens[static_cast<size_t>(id)];
  std::string piece;
  if (type == TokenType::kByte) {
    const int byte = tokenizer_detail::byte_of_fallback_token(text);
    if (byte >= 0) piece = std::string(1, static_cast<char>(byte));
  } else if (type == TokenType::kNormal) {
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
        piece += ' ';
        i += 3;
      } else {
        piece += text[i++];
      }
    }
  }
  return piece;
}

// add_space_prefix: a '▁' at the start and after each special token.
Status SentencePieceModel::encode(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
  if (v_.vocab.add_space_prefix && after_special) {
    std::string prefixed = " ";
    prefixed.append(text);
    encode_text(prefixed, out);
  } else {
    encode_text(text, out);
  }
  return ok_status();
}

void SentencePieceModel::encode_text(std::string_view fragment, std::vector<int32_t>& out) const {
  std::string text;
  text.reserve(fragment.size() + 8);
  for (char c : fragment) {
    if (c == ' ') {
      text += "\xE2\x96\x81";  // '▁'
    } else {
      text += c;
    }
  }
  std::vector<Piece> symbols;
  for (size_t offset = 0; offset < text.size();) {
    const size_t size = std::min(lead_length(text[offset]), text.size() - offset);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({offset, size, index - 1, offset + size < text.size() ? index + 1 : -1});
    offset += size;
  }
  std::priority_queue<Merge, std::vector<Merge>, LaterMerge> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t size = symbols[left].size + symbols[right].size;
    const int32_t id = find(std::string_view(text).substr(symbols[left].begin, size));
    if (id < 0) return;
    queue.push({v_.vocab.scores.empty() ? 0.0f : v_.vocab.scores[id], left, right, size});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Merge c = queue.top();
    queue.pop();
    Piece& left = symbols[c.left];
    Piece& right = symbols[c.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != c.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  if (symbols.empty()) return;
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = std::string_view(text).substr(symbols[i].begin, symbols[i].size);
    const int32_t id = find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    bool all_bytes = true;
    for (char c : piece) all_bytes = all_bytes && fallback_tokens_[static_cast<uint8_t>(c)] >= 0;
    if (!all_bytes) {  // a vocabulary without byte fallback: one unknown token for the character
      if (v_.vocab.unk >= 0) out.push_back(v_.vocab.unk);
      continue;
    }
    for (char c : piece) out.push_back(fallback_tokens_[static_cast<uint8_t>(c)]);
  }
}

}  // namespace

std::unique_ptr<TokenizerModel> make_sentencepiece_model(const Vocabulary& v) {
  return std::make_unique<SentencePieceModel>(v);
}

}  // namespace nmkit
