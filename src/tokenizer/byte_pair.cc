// GPT-2 byte-level BPE (docs/design.md section 11.3): pre-tokenizer pieces, each piece's bytes as
// byte tokens, then merges applied lowest rank first (leftmost first among equal ranks), as
// llama.cpp's llm_tokenizer_bpe_session and the `tokenizers` BPE model do.
#include <algorithm>
#include <memory>

#include "tokenizer/pretokenize.h"

#include "tokenizer/tokenizer_impl.h"

namespace nmkit {
namespace tokenizer_detail {

std::array<uint32_t, 256> gpt2_byte_code_points() {
  std::array<uint32_t, 256> code_points{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    code_points[b] = printable ? b : next++;
  }
  return code_points;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t valid_utf8_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length;
  uint32_t cp, min;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, cp = lead & 0x1Fu, min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, cp = lead & 0x0Fu, min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, cp = lead & 0x07u, min = 0x10000;
  } else {
    return 0;  // continuation byte, overlong 2-byte lead (C0, C1) or beyond U+10FFFF (F5..FF)
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return length;
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t length = valid_utf8_length(text, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD for this one byte, as llama.cpp's unicode_cpts_from_utf8
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

}  // namespace tokenizer_detail

namespace {

struct Symbol {
  int32_t id;
  int32_t prev, next;  // neighbours in the piece, -1 at its ends
};

struct Candidate {
  int32_t rank;
  int32_t left, right;  // symbol indices
  int32_t left_id, right_id;
  int32_t result;
};

// Lowest rank first, then leftmost (llama.cpp's llm_bigram_bpe comparator).
struct LaterCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// GPT-2 byte-level BPE over a vocabulary in GPT-2's byte alphabet.
class BytePairModel final : public TokenizerModel {
 public:
  explicit BytePairModel(const Vocabulary& v) : v_(v) {}
  Status build();
  Status encode(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;
  std::string piece(int32_t id, TokenType type) const override;
  bool reads_code_points() const override { return true; }
  bool strips_leading_space() const override { return false; }

 private:
  int32_t find(std::string_view text) const { return v_.find(text); }

  const Vocabulary& v_;
  // GPT-2's bytes_to_unicode table (byte -> UTF-8 of its stand-in code point), the token of each
  // single byte, each stand-in code point's byte, and merges keyed by (left id, right id).
  std::array<std::string, 256> byte_chars_;
  std::array<int32_t, 256> byte_tokens_{};
  std::unordered_map<uint32_t, uint8_t> byte_of_;
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  std::unordered_map<uint64_t, Merge> merges_;
  tokenizer_detail::PreTokenizer pre_tokenizer_;
};

Status BytePairModel::build() {
  const TokenizerVocab& v = v_.vocab;
  auto pre = tokenizer_detail::PreTokenizer::create(v.pre);
  if (!pre.ok()) return pre.error();
  pre_tokenizer_ = std::move(pre.value());
  const auto code_points = tokenizer_detail::gpt2_byte_code_points();
  for (int b = 0; b < 256; ++b) {
    tokenizer_detail::append_utf8(code_points[b], byte_chars_[b]);
    byte_tokens_[b] = find(byte_chars_[b]);
    byte_of_[code_points[b]] = static_cast<uint8_t>(b);
  }
  merges_.reserve(v.merges.size());
  for (size_t rank = 0; rank < v.merges.size(); ++rank) {
    const std::string& merge = v.merges[rank];
    const size_t space = merge.find(' ', 1);  // a merge's left side may itself start with ' '
    const int32_t left = space == std::string::npos ? -1 : find(std::string_view(merge).substr(0, space));
    const int32_t right = space == std::string::npos ? -1 : find(std::string_view(merge).substr(space + 1));
    const int32_t result = (left < 0 || right < 0) ? -1 : find(v.tokens[left] + v.tokens[right]);
    if (result < 0) {
      return Error("tokenizer.ggml.merges[" + std::to_string(rank) + "] = " + tokenizer_detail::quoted(merge) +
                   ": its sides and their concatenation must all be tokens");
    }
    // A repeated pair keeps its first (lowest) rank, as llama.cpp's bpe_ranks.emplace.
    merges_.emplace((static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right),
                    Merge{static_cast<int32_t>(rank), result});
  }
  return ok_status();
}

std::string BytePairModel::piece(int32_t id, TokenType type) const {
  std::string piece;
  if (type == TokenType::kNormal) {
    // Each character back to its byte; a character outside the byte alphabet (not in a
    // well-formed vocabulary) is kept as its UTF-8.
    const std::string& text = v_.vocab.tokens[static_cast<size_t>(id)];
    for (size_t i = 0; i < text.size();) {
      size_t length = tokenizer_detail::valid_utf8_length(text, i);
      if (length == 0) length = 1;
      uint32_t cp = static_cast<uint8_t>(text[i]);
      if (length > 1) {
        cp &= 0xFFu >> (length + 1);
        for (size_t k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3Fu);
      }
      auto it = byte_of_.find(cp);
      if (it != byte_of_.end()) {
        piece += static_cast<char>(it->second);
      } else {
        piece.append(text, i, length);
      }
      i += length;
    }
  } else if (type == TokenType::kByte) {
    const int byte = tokenizer_detail::byte_of_fallback_token(v_.vocab.tokens[static_cast<size_t>(id)]);
    if (byte >= 0) piece = std::string(1, static_cast<char>(byte));
  }  // unused / undefined tokens decode to nothing, as in llama.cpp
  return piece;
}

Status BytePairModel::encode(std::string_view text, bool, std::vector<int32_t>& out) const {
  std::vector<tokenizer_detail::Piece> split;
  NMKIT_TRY(pre_tokenizer_.split(text, split));
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::string encoded;
  for (const tokenizer_detail::Piece& piece : split) {
    const std::string_view bytes = text.substr(piece.begin, piece.size);
    if (pre_tokenizer_.ignore_merges()) {
      encoded.clear();
      for (char c : bytes) encoded += byte_chars_[static_cast<uint8_t>(c)];
      const int32_t whole = find(encoded);
      if (whole >= 0) {
        out.push_back(whole);
        continue;
      }
    }
    if (bytes.size() == 1) {  // nothing to merge (most digits and punctuation under smollm)
      const int32_t id = byte_tokens_[static_cast<uint8_t>(bytes[0])];
      if (id >= 0) out.push_back(id);
      continue;
    }
    symbols.resize(bytes.size());
    const auto n = static_cast<int32_t>(bytes.size());
    for (int32_t i = 0; i < n; ++i) {
      symbols[i] = {byte_tokens_[static_cast<uint8_t>(bytes[i])], i - 1, i + 1 < n ? i + 1 : -1};
    }
    // A binary heap in a vector reused across pieces: the first candidates are heapified at once
    // (linear), later ones pushed.
    heap.clear();
    const LaterCandidate later;
    auto candidate = [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return false;
      const int32_t a = symbols[left].id, b = symbols[right].id;
      if (a < 0 || b < 0) return false;
      auto it = merges_.find((static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b));
      if (it == merges_.end()) return false;
      heap.push_back({it->second.rank, left, right, a, b, it->second.result});
      return true;
    };
    for (int32_t i = 0; i + 1 < n; ++i) candidate(i, i + 1);
    std::make_heap(heap.begin(), heap.end(), later);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const Candidate c = heap.back();
      heap.pop_back();
      Symbol& left = symbols[c.left];
      Symbol& right = symbols[c.right];
      // Stale: a side was merged away or changed since this pair was queued.
      if (left.id != c.left_id || right.id != c.right_id || left.next != c.right) continue;
      left.id = c.result;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = c.left;
      right.id = -2;  // merged away
      if (candidate(left.prev, c.left)) std::push_heap(heap.begin(), heap.end(), later);
      if (candidate(c.left, left.next)) std::push_heap(heap.begin(), heap.end(), later);
    }
    for (int32_t i = 0; i >= 0; i = symbols[i].next) {
      // A byte whose stand-in character is not in the vocabulary has no token; llama.cpp drops
      // it too.
      if (symbols[i].id >= 0) out.push_back(symbols[i].id);
    }
  }
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<TokenizerModel>> make_byte_pair_model(const Vocabulary& v) {
  auto model = std::make_unique<BytePairModel>(v);
  NMKIT_TRY(model->build());
  return std::unique_ptr<TokenizerModel>(std::move(model));
}

}  // namespace nmkit
