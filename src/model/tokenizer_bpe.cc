// GPT-2 byte-level BPE (docs/design.md section 11.3): pre-tokenizer pieces, each piece's bytes as
// byte tokens, then merges applied lowest rank first (leftmost first among equal ranks), as
// llama.cpp's llm_tokenizer_bpe_session and the `tokenizers` BPE model do.
#include <algorithm>

#include "model/tokenizer_impl.h"

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

}  // namespace

void Tokenizer::Impl::encode_gpt2(std::string_view text, std::vector<int32_t>& out,
                                  std::vector<tokenizer_detail::Piece>& split,
                                  Status& status) const {
  status = pre_tokenizer.split(text, split);
  if (!status.ok()) return;
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::string encoded;
  for (const tokenizer_detail::Piece& piece : split) {
    const std::string_view bytes = text.substr(piece.begin, piece.size);
    if (pre_tokenizer.ignore_merges()) {
      encoded.clear();
      for (char c : bytes) encoded += byte_chars[static_cast<uint8_t>(c)];
      const int32_t whole = find(encoded);
      if (whole >= 0) {
        out.push_back(whole);
        continue;
      }
    }
    if (bytes.size() == 1) {  // nothing to merge (most digits and punctuation under smollm)
      const int32_t id = byte_tokens[static_cast<uint8_t>(bytes[0])];
      if (id >= 0) out.push_back(id);
      continue;
    }
    symbols.resize(bytes.size());
    const auto n = static_cast<int32_t>(bytes.size());
    for (int32_t i = 0; i < n; ++i) {
      symbols[i] = {byte_tokens[static_cast<uint8_t>(bytes[i])], i - 1, i + 1 < n ? i + 1 : -1};
    }
    // A binary heap in a vector reused across pieces: the first candidates are heapified at once
    // (linear), later ones pushed.
    heap.clear();
    const LaterCandidate later;
    auto candidate = [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return false;
      const int32_t a = symbols[left].id, b = symbols[right].id;
      if (a < 0 || b < 0) return false;
      auto it = merges.find((static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b));
      if (it == merges.end()) return false;
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
}

}  // namespace nmkit
