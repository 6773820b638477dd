// Tokenizer::from_gguf on small GGUF files written with write_gguf: the keys reach the tokenizer
// (same ids as Tokenizer::create on the same vocabulary), llama.cpp's defaults apply to absent
// keys, and bad metadata is a one-line error naming the file and key. The real SmolLM2 file is
// checked against the `tokenizers` oracle in hf_oracle_test.py.
#include <gtest/gtest.h>

#include <filesystem>

#include "nmkit/gguf.h"
#include "nmkit/tokenizer.h"

namespace nmkit {
namespace {

std::vector<GgufValue> strings(const std::vector<std::string>& items) {
  std::vector<GgufValue> out;
  for (const auto& s : items) out.push_back(GgufValue::of_string(s));
  return out;
}

// A byte-level vocabulary: the 256 GPT-2 byte characters plus "he" and "ll".
std::vector<GgufKeyValue> tokenizer_metadata() {
  std::vector<std::string> tokens;
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = printable ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    tokens.push_back(s);
  }
  tokens.push_back("he");
  tokens.push_back("ll");
  tokens.push_back("<|im_end|>");
  std::vector<GgufValue> types;
  for (size_t i = 0; i < tokens.size(); ++i) types.push_back(GgufValue::of_int32(i + 1 == tokens.size() ? 3 : 1));
  return {
      {"general.architecture", GgufValue::of_string("llama")},
      {"tokenizer.ggml.model", GgufValue::of_string("gpt2")},
      {"tokenizer.ggml.pre", GgufValue::of_string("smollm")},
      {"tokenizer.ggml.tokens", GgufValue::of_array(GgufType::String, strings(tokens))},
      {"tokenizer.ggml.token_type", GgufValue::of_array(GgufType::I32, types)},
      {"tokenizer.ggml.merges", GgufValue::of_array(GgufType::String, strings({"h e", "l l"}))},
      {"tokenizer.ggml.eos_token_id", GgufValue::of_uint32(258)},
      {"tokenizer.ggml.add_bos_token", GgufValue::of_bool(false)},
      {"tokenizer.chat_template", GgufValue::of_string("{{ '<|im_start|>' }}")},
  };
}

class GgufTokenizer : public ::testing::Test {
 protected:
  std::string write(const std::vector<GgufKeyValue>& metadata) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("nmkit_tokenizer_" + std::to_string(::getpid()) + ".gguf")).string();
    EXPECT_TRUE(write_gguf(path, metadata, {}).ok());
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const auto& p : paths_) std::filesystem::remove(p);
  }
  std::vector<std::string> paths_;
};

TEST_F(GgufTokenizer, KeysReachTheTokenizer) {
  auto file = GgufFile::open(write(tokenizer_metadata()));
  ASSERT_TRUE(file.ok()) << file.error().message();
  auto t = Tokenizer::from_gguf(file.value());
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->n_vocab(), 259);
  EXPECT_EQ(t->eos(), 258);
  EXPECT_EQ(t->bos(), -1);
  EXPECT_FALSE(t->add_bos());
  EXPECT_EQ(t->pre(), "smollm");
  EXPECT_EQ(t->chat_template(), "{{ '<|im_start|>' }}");
  auto ids = t->encode("hello<|im_end|>", false, true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.value(), (std::vector<int32_t>{256, 257, 'o', 258}));
  EXPECT_TRUE(t->is_eog(258));
}

TEST_F(GgufTokenizer, BadMetadataNamesFileAndKey) {
  auto expect_error = [&](std::vector<GgufKeyValue> metadata, const std::string& needle) {
    const std::string path = write(metadata);
    auto file = GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message();
    auto t = Tokenizer::from_gguf(file.value());
    ASSERT_FALSE(t.ok()) << needle;
    EXPECT_NE(t.error().message().find(needle), std::string::npos) << t.error().message();
    EXPECT_NE(t.error().message().find(path), std::string::npos) << t.error().message();
  };
  auto m = tokenizer_metadata();
  m.erase(m.begin() + 3);  // no tokens
  expect_error(m, "tokenizer.ggml.tokens");
  m = tokenizer_metadata();
  m[6].value = GgufValue::of_uint32(5000);
  expect_error(m, "tokenizer.ggml.eos_token_id = 5000");
  m = tokenizer_metadata();
  m[2].value = GgufValue::of_string("klingon");
  expect_error(m, "unsupported tokenizer.ggml.pre 'klingon'");
  m = tokenizer_metadata();
  m.erase(m.begin() + 5);  // gpt2 without merges
  expect_error(m, "tokenizer.ggml.merges");
}

}  // namespace
}  // namespace nmkit
