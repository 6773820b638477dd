// libFuzzer target: the byte-level BPE tokenizer (src/model/tokenizer*.cc) on any text, with every
// supported pre-tokenizer. The first input byte picks the pre-tokenizer and whether control tokens
// written in the text are parsed; the rest is the text. A crash, hang, leak or sanitizer report is a
// bug, and so is valid UTF-8 text that encodes but does not decode back to itself (byte-level BPE
// is lossless).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nmkit/tokenizer.h"

namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 stands for itself, the other bytes take U+0100.. in
// order (as tests/tokenizer/tokenizer_test.cc writes it out).
std::string byte_char(int b) {
  int next = 256, cp = -1;
  for (int x = 0; x < 256; ++x) {
    const bool printable = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
    const int c = printable ? x : next++;
    if (x == b) cp = c;
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

std::vector<nmkit::Tokenizer> make_tokenizers() {
  std::vector<nmkit::Tokenizer> out;
  for (const std::string& pre : nmkit::Tokenizer::supported_pre_types()) {
    nmkit::TokenizerVocab v;
    v.model = "gpt2";
    v.pre = pre;
    for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_char(b));
    const std::string G = byte_char(' ');
    const std::vector<std::pair<std::string, std::string>> merges = {
        {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {G, "w"}, {"o", "r"},
        {G + "w", "or"}, {"l", "d"}, {G + "wor", "ld"}, {"1", "2"}, {G, G}};
    for (const auto& [a, b] : merges) {
      v.merges.push_back(a + " " + b);
      v.tokens.push_back(a + b);
    }
    v.tokens.push_back("<|im_start|>");
    v.tokens.push_back("<|im_end|>");
    v.token_types.assign(v.tokens.size(), 1);
    v.token_types[v.tokens.size() - 2] = 3;
    v.token_types[v.tokens.size() - 1] = 3;
    v.eos = static_cast<int32_t>(v.tokens.size() - 1);
    auto t = nmkit::Tokenizer::create(std::move(v));
    if (!t.ok()) __builtin_trap();
    out.push_back(std::move(*t));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<nmkit::Tokenizer> tokenizers = make_tokenizers();
  if (size == 0 || tokenizers.empty()) return 0;
  const nmkit::Tokenizer& t = tokenizers[data[0] % tokenizers.size()];
  const bool parse_special = (data[0] & 0x80) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto ids = t.encode(text, /*add_special=*/false, parse_special);
  if (!ids.ok()) return 0;
  // Invalid UTF-8 may be repaired by the pre-tokenizer (PCRE2 matches UTF-8 only), so only valid
  // text must round-trip.
  if (!nmkit::first_invalid_utf8(text) && t.decode(*ids) != text) __builtin_trap();
  return 0;
}
