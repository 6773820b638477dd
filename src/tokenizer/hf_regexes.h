// The original (tokenizer.json) forms of the pre-tokenizer regexes llama.cpp adapts (llama-vocab.cpp).
// One copy for both directions: from_hf_json.cc recognises a pre type by them when it reads a
// tokenizer.json, hf_json_write.cc writes them, so a written file reads back as the same type
// (docs/design.md section 11.3).
#pragma once

namespace nmkit::tokenizer_detail {

inline constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// llama.cpp's regexes for a vocabulary without a pre type ("default"), applied in turn.
inline constexpr const char* kDefaultRegexes[] = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))", R"(\p{N}+)",
    "[0-9][0-9][0-9]"};

}  // namespace nmkit::tokenizer_detail
