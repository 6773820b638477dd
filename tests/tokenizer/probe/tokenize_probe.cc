// Test helper for tests/tokenizer/*.py: loads a tokenizer.json (from_hf_json) or a .gguf file
// (from_gguf) with nmkit, encodes
// every text of a JSON array (strings, or {"hex": bytes} for invalid UTF-8; add_special=false, parse_special=true, as `tokenizers` encodes with
// add_special_tokens=False) and writes [{"ids": [...], "roundtrip": decode(ids) == text}, ...].
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nmkit/gguf.h"
#include "nmkit/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: tokenize_probe TOKENIZER_JSON|MODEL.gguf TEXTS_JSON OUT_JSON\n");
    return 2;
  }
  const std::string source = argv[1];
  auto load = [&]() -> nmkit::Result<nmkit::Tokenizer> {
    if (source.size() > 5 && source.substr(source.size() - 5) == ".gguf") {
      auto file = nmkit::GgufFile::open(source);
      if (!file.ok()) return file.error();
      return nmkit::Tokenizer::from_gguf(file.value());
    }
    return nmkit::Tokenizer::from_hf_json(source);
  };
  auto tokenizer = load();
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tokenize_probe: %s\n", tokenizer.error().message().c_str());
    return 1;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const auto texts = nlohmann::json::parse(buffer.str());
  nlohmann::json results = nlohmann::json::array();
  for (const auto& item : texts) {
    // A text is a JSON string, or {"hex": "..."} for bytes that are not valid UTF-8.
    std::string text;
    if (item.is_object()) {
      const std::string hex = item["hex"].get<std::string>();
      for (size_t i = 0; i + 1 < hex.size(); i += 2) {
        text += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
      }
    } else {
      text = item.get<std::string>();
    }
    auto ids = tokenizer->encode(text, /*add_special=*/false, /*parse_special=*/true);
    if (!ids.ok()) {
      std::fprintf(stderr, "tokenize_probe: %s\n", ids.error().message().c_str());
      return 1;
    }
    results.push_back({{"ids", ids.value()}, {"roundtrip", tokenizer->decode(ids.value()) == text}});
  }
  std::ofstream(argv[3]) << results.dump();
  return 0;
}
