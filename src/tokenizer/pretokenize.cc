#include "tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace nmkit::tokenizer_detail {
namespace {

// The regex sequences of llama.cpp's src/llama-vocab.cpp (llm_tokenizer_bpe) per pre type, as the
// Hugging Face tokenizer.json files they come from write them. `\s` / `\S` are rewritten to the
// Unicode White_Space property below: llama.cpp's whitespace set is exactly White_Space, while
// PCRE2's UCP `\s` also matches U+180E.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct PreType {
  std::vector<std::string> names;  // tokenizer.ggml.pre values (llama.cpp's aliases)
  std::vector<const char*> regexes;
  bool ignore_merges;
};

const std::vector<PreType>& pre_types() {
  static const std::vector<PreType> types = {
      {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}, false},
      {{"gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe", "exaone4"}, {kGpt2}, false},
      // SmolLM2: digits one by one, then the GPT-2 regex (docs/design.md section 11.3).
      {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
       {R"(\p{N})", kGpt2},
       false},
      {{"llama3", "llama-bpe", "llama-v3", "falcon3", "pixtral", "dbrx", "smaug-bpe"},
       {kLlama3},
       true},
      {{"qwen2", "stablelm2", "deepseek-r1-qwen", "megrez"}, {kQwen2}, false},
  };
  return types;
}

// `\s` -> \p{White_Space}, `\S` -> \P{White_Space} (inside classes too: [^\s...] stays valid).
std::string with_unicode_whitespace(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 's' || next == 'S') {
        out += next == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
      } else {
        out += pattern.substr(i, 2);
      }
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  std::string pattern;
  ~Regex() { pcre2_code_free(code); }
};

std::vector<std::string> PreTokenizer::supported() {
  std::vector<std::string> names;
  for (const PreType& type : pre_types()) names.insert(names.end(), type.names.begin(), type.names.end());
  return names;
}

Result<PreTokenizer> PreTokenizer::create(const std::string& pre) {
  const std::string name = pre.empty() ? "default" : pre;  // llama.cpp: missing pre -> default
  for (const PreType& type : pre_types()) {
    if (std::find(type.names.begin(), type.names.end(), name) == type.names.end()) continue;
    PreTokenizer result;
    result.ignore_merges_ = type.ignore_merges;
    for (const char* source : type.regexes) {
      auto regex = std::make_shared<Regex>();
      regex->pattern = with_unicode_whitespace(source);
      int error = 0;
      PCRE2_SIZE error_offset = 0;
      regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex->pattern.data()),
                                  regex->pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                                  &error_offset, nullptr);
      if (regex->code == nullptr) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, sizeof message);
        return Error("pre-tokenizer '" + name + "': regex '" + regex->pattern +
                     "' does not compile at offset " + std::to_string(error_offset) + ": " +
                     reinterpret_cast<const char*>(message));
      }
      // JIT is an accelerator only: a build without it falls back to the interpreter.
      (void)pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);
      result.regexes_.push_back(std::move(regex));
    }
    return result;
  }
  std::string known;
  for (const std::string& n : supported()) known += (known.empty() ? "" : ", ") + n;
  return Error("unsupported tokenizer.ggml.pre '" + pre + "' (supported: " + known + ")");
}

Status PreTokenizer::split(std::string_view text, std::vector<Piece>& pieces) const {
  pieces.clear();
  if (text.empty()) return ok_status();
  pieces.push_back({0, text.size()});
  std::vector<Piece> next;
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  // These patterns backtrack at most over one run of a single class (e.g. `\s*[\r\n]+` over a run
  // of spaces), so the work is linear in the piece; lift the default limits (10M steps) that a
  // 10 MB run would reach.
  pcre2_set_match_limit(context, UINT32_MAX);
  pcre2_set_depth_limit(context, UINT32_MAX);
  Status status;
  for (const auto& regex : regexes_) {
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex->code, nullptr);
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const Piece& piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + piece.begin);
      size_t start = 0, emitted = 0;
      while (start < piece.size) {
        const int rc = pcre2_match(regex->code, subject, piece.size, start, PCRE2_NO_UTF_CHECK,
                                   match, context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR message[256];
          pcre2_get_error_message(rc, message, sizeof message);
          status = Error("pre-tokenizer regex '" + regex->pattern + "' failed at byte " +
                         std::to_string(piece.begin + start) + ": " +
                         reinterpret_cast<const char*>(message));
          break;
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
        size_t match_begin = ovector[0], match_end = ovector[1];
        if (match_end == match_begin) {  // no pattern here matches empty; guard anyway
          ++match_end;
          while (match_end < piece.size && (subject[match_end] & 0xC0) == 0x80) ++match_end;
          start = match_end;
          continue;
        }
        if (match_begin > emitted) next.push_back({piece.begin + emitted, match_begin - emitted});
        next.push_back({piece.begin + match_begin, match_end - match_begin});
        emitted = start = match_end;
      }
      if (!status.ok()) break;
      if (emitted < piece.size) next.push_back({piece.begin + emitted, piece.size - emitted});
    }
    pcre2_match_data_free(match);
    if (!status.ok()) break;
    pieces.swap(next);
  }
  pcre2_match_context_free(context);
  return status;
}

}  // namespace nmkit::tokenizer_detail
