// Test helper for tests/tokenizer/hf_oracle_test.py: loads a tokenizer.json with nmkit, encodes
// every text of a JSON array (add_special=false, parse_special=true, as `tokenizers` encodes with
// add_special_tokens=False) and writes [{"ids": [...], "roundtrip": decode(ids) == text}, ...].
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nmkit/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: tokenize_probe TOKENIZER_JSON TEXTS_JSON OUT_JSON\n");
    return 2;
  }
  auto tokenizer = nmkit::Tokenizer::from_hf_json(argv[1]);
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
    const std::string text = item.get<std::string>();
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
