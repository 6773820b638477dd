// Tokenizer::from_gguf: the tokenizer.ggml.* keys of a GGUF file (docs/design.md sections 11.1,
// 11.3), with llama.cpp's defaults for absent optional keys.
#include "tokenizer/tokenizer_impl.h"
#include "nmkit/gguf.h"

namespace nmkit {
namespace {

const std::vector<std::string> kAddBosByDefault = {"llama3", "llama-bpe", "llama-v3", "falcon3",
                                                   "pixtral", "dbrx", "smaug-bpe"};

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  TokenizerVocab v;
  auto model = file.get_string("tokenizer.ggml.model");
  if (!model.ok()) return model.error();
  v.model = model.value();
  if (file.find_key("tokenizer.ggml.pre") != nullptr) {
    auto pre = file.get_string("tokenizer.ggml.pre");
    if (!pre.ok()) return pre.error();
    v.pre = pre.value();
  }
  auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.error();
  v.tokens = std::move(tokens.value());
  if (const GgufValue* scores = file.find_key("tokenizer.ggml.scores")) {
    if (scores->type == GgufType::Array && scores->element_type != GgufType::F32 &&
        scores->element_type != GgufType::F64) {
      auto ints = file.get_int_array("tokenizer.ggml.scores");  // llama.cpp accepts i32 scores
      if (!ints.ok()) return ints.error();
      for (int64_t s : ints.value()) v.scores.push_back(static_cast<float>(s));
    } else {
      auto floats = file.get_float_array("tokenizer.ggml.scores");
      if (!floats.ok()) return floats.error();
      v.scores = std::move(floats.value());
    }
  }
  if (file.find_key("tokenizer.ggml.token_type") != nullptr) {
    auto types = file.get_int_array("tokenizer.ggml.token_type");
    if (!types.ok()) return types.error();
    for (size_t i = 0; i < types->size(); ++i) {
      const int64_t t = types.value()[i];
      if (t < 0 || t > 6) {
        return Error(file.path() + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] = " +
                     std::to_string(t) + " is not a token type (0..6)");
      }
      v.token_types.push_back(static_cast<int32_t>(t));
    }
  }
  if (v.model == "gpt2") {
    auto merges = file.get_string_array("tokenizer.ggml.merges");
    if (!merges.ok()) return merges.error();
    v.merges = std::move(merges.value());
  }
  const std::pair<const char*, int32_t*> ids[] = {{"tokenizer.ggml.bos_token_id", &v.bos},
                                                  {"tokenizer.ggml.eos_token_id", &v.eos},
                                                  {"tokenizer.ggml.unknown_token_id", &v.unk},
                                                  {"tokenizer.ggml.padding_token_id", &v.pad}};
  if (v.model == "llama") v.bos = 1, v.eos = 2, v.unk = 0;  // llama.cpp's SentencePiece defaults
  for (const auto& [key, field] : ids) {
    if (file.find_key(key) == nullptr) continue;
    auto id = file.get_uint(key);
    if (!id.ok()) return id.error();
    if (id.value() >= v.tokens.size()) {
      return Error(file.path() + ": " + key + " = " + std::to_string(id.value()) +
                   " is outside the vocabulary of " + std::to_string(v.tokens.size()));
    }
    *field = static_cast<int32_t>(id.value());
  }
  for (int32_t* field : {&v.bos, &v.eos, &v.unk}) {
    if (*field >= static_cast<int64_t>(v.tokens.size())) *field = -1;  // a default past a small vocab
  }
  v.add_bos = v.model == "llama" ||
              std::find(kAddBosByDefault.begin(), kAddBosByDefault.end(), v.pre) != kAddBosByDefault.end();
  v.add_space_prefix = v.model == "llama";
  const std::pair<const char*, bool*> flags[] = {{"tokenizer.ggml.add_bos_token", &v.add_bos},
                                                 {"tokenizer.ggml.add_eos_token", &v.add_eos},
                                                 {"tokenizer.ggml.add_space_prefix", &v.add_space_prefix}};
  for (const auto& [key, field] : flags) {
    if (file.find_key(key) == nullptr) continue;
    auto flag = file.get_bool(key);
    if (!flag.ok()) return flag.error();
    *field = flag.value();
  }
  if (file.find_key("tokenizer.chat_template") != nullptr) {
    auto chat = file.get_string("tokenizer.chat_template");
    if (!chat.ok()) return chat.error();
    v.chat_template = std::move(chat.value());
  }
  auto created = Tokenizer::create(std::move(v));
  if (!created.ok()) return created.error().with_context(file.path() + ": ");
  return created;
}

}  // namespace nmkit
