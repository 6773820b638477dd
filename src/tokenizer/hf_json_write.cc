// A GGUF file's GPT-2 byte-level BPE tokenizer (tokenizer.ggml.*) written as the Hugging Face files
// that describe it: tokenizer.json (the `tokenizers` library's format), tokenizer_config.json and
// generation_config.json (docs/design.md section 11.1, "Writing a Hugging Face folder"). The
// pre-tokenizer is written in the form Tokenizer::from_hf_json recognises for the same llama.cpp pre
// type, which is also the form the model's own Hugging Face repository uses (SmolLM2: Digits with
// individual digits, then ByteLevel), so `tokenizers` and nmkit split the text alike.
#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "nmkit/gguf.h"
#include "nmkit/model_write.h"
#include "nmkit/tokenizer.h"

#include "tokenizer/hf_regexes.h"

namespace nmkit {
namespace {

using ojson = nlohmann::ordered_json;

using tokenizer_detail::kDefaultRegexes;
using tokenizer_detail::kLlama3Regex;
using tokenizer_detail::kQwen2Regex;

bool one_of(const std::string& pre, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return pre == n; });
}

ojson byte_level(bool use_regex) {
  return ojson{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

ojson split(const char* regex) {
  return ojson{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

// The pre-tokenizer of llama.cpp's pre type (the families of pretokenize.cc), or null.
ojson pre_tokenizer(const std::string& pre) {
  if (one_of(pre, {"gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe", "exaone4"})) return byte_level(true);
  if (one_of(pre, {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"})) {
    return ojson{{"type", "Sequence"},
                 {"pretokenizers", ojson::array({ojson{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
  }
  const char* regex = nullptr;
  if (one_of(pre, {"llama3", "llama-bpe", "llama-v3", "falcon3", "pixtral", "dbrx", "smaug-bpe"})) regex = kLlama3Regex;
  if (one_of(pre, {"qwen2", "stablelm2", "deepseek-r1-qwen", "megrez"})) regex = kQwen2Regex;
  if (regex != nullptr) {
    return ojson{{"type", "Sequence"}, {"pretokenizers", ojson::array({split(regex), byte_level(false)})}};
  }
  if (pre.empty() || pre == "default") {
    ojson list = ojson::array();
    for (const char* r : kDefaultRegexes) list.push_back(split(r));
    list.push_back(byte_level(false));
    return ojson{{"type", "Sequence"}, {"pretokenizers", list}};
  }
  return nullptr;
}

std::string dumped(const ojson& value) {
  // replace: never throws (the GGUF reader has already refused invalid UTF-8 in strings).
  return value.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

}  // namespace

Result<HfTokenizerFiles> hf_tokenizer_files(const GgufFile& file, int64_t n_ctx_train) {
  const std::string where = file.path() + ": ";
  auto model = file.get_string("tokenizer.ggml.model");
  if (!model.ok()) return model.error();
  if (*model != "gpt2") {
    return Error(where + "tokenizer.ggml.model '" + *model +
                 "' cannot be written as a Hugging Face tokenizer.json (supported: gpt2)");
  }
  auto tokenizer = Tokenizer::from_gguf(file);
  if (!tokenizer.ok()) return tokenizer.error();
  const Tokenizer& tok = *tokenizer;
  ojson pre = pre_tokenizer(tok.pre());
  if (pre.is_null()) {
    return Error(where + "tokenizer.ggml.pre '" + tok.pre() + "' cannot be written as a Hugging Face tokenizer.json");
  }
  auto merges = file.get_string_array("tokenizer.ggml.merges");
  if (!merges.ok()) return merges.error();

  ojson added = ojson::array();
  // The vocabulary in id order. ordered_json's operator[] searches linearly (49152^2 / 2 string
  // compares for SmolLM2), so entries are appended to its vector directly, duplicates found by set.
  ojson vocab = ojson::object();
  auto& entries = vocab.get_ref<ojson::object_t&>();
  entries.reserve(static_cast<size_t>(tok.n_vocab()));
  std::unordered_set<std::string_view> seen;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const std::string& text = tok.token_text(id);
    if (!seen.insert(text).second) {
      return Error(where + "tokenizer.ggml.tokens holds '" + text + "' twice");  // Tokenizer::create refuses it too
    }
    entries.emplace_back(text, id);
    const TokenType type = tok.token_type(id);
    // Control tokens are HF "special" added tokens, user-defined ones plain added tokens: the two
    // kinds Tokenizer::from_hf_json maps back to types 3 and 4.
    if (type == TokenType::kControl || type == TokenType::kUserDefined) {
      added.push_back(ojson{{"id", id},
                            {"content", text},
                            {"single_word", false},
                            {"lstrip", false},
                            {"rstrip", false},
                            {"normalized", type != TokenType::kControl},
                            {"special", type == TokenType::kControl}});
    }
  }
  auto text_of = [&](int32_t id) { return id < 0 ? ojson(nullptr) : ojson(tok.token_text(id)); };
  // A BOS/EOS the GGUF asks for is added by a TemplateProcessing post-processor, as HF does it.
  ojson post;
  if (tok.add_bos() || tok.add_eos()) {
    ojson single = ojson::array(), pair = ojson::array(), special = ojson::object();
    auto add_special = [&](int32_t id) {
      const std::string& t = tok.token_text(id);
      special[t] = ojson{{"id", t}, {"ids", ojson::array({id})}, {"tokens", ojson::array({t})}};
    };
    if (tok.add_bos()) {
      single.push_back(ojson{{"SpecialToken", {{"id", tok.token_text(tok.bos())}, {"type_id", 0}}}});
      add_special(tok.bos());
    }
    single.push_back(ojson{{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    if (tok.add_eos()) {
      single.push_back(ojson{{"SpecialToken", {{"id", tok.token_text(tok.eos())}, {"type_id", 0}}}});
      add_special(tok.eos());
    }
    pair = single;
    for (const ojson& piece : single) {
      if (piece.contains("Sequence")) {
        pair.push_back(ojson{{"Sequence", {{"id", "B"}, {"type_id", 1}}}});
      } else {
        pair.push_back(ojson{{"SpecialToken", {{"id", piece["SpecialToken"]["id"]}, {"type_id", 1}}}});
      }
    }
    post = ojson{{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", special}};
  } else {
    post = ojson{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  }
  ojson json{{"version", "1.0"},
             {"truncation", nullptr},
             {"padding", nullptr},
             {"added_tokens", added},
             {"normalizer", nullptr},
             {"pre_tokenizer", pre},
             {"post_processor", post},
             {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
             {"model",
              {{"type", "BPE"},
               {"dropout", nullptr},
               {"unk_token", text_of(tok.unk())},
               {"continuing_subword_prefix", nullptr},
               {"end_of_word_suffix", nullptr},
               {"fuse_unk", false},
               {"byte_fallback", false},
               {"ignore_merges", false},
               {"vocab", vocab},
               {"merges", *merges}}}};

  ojson config{{"add_bos_token", tok.add_bos()},
               {"add_eos_token", tok.add_eos()},
               {"bos_token", text_of(tok.bos())},
               {"eos_token", text_of(tok.eos())},
               {"unk_token", text_of(tok.unk())},
               {"pad_token", text_of(tok.pad())},
               {"clean_up_tokenization_spaces", false},
               {"model_max_length", n_ctx_train},
               {"tokenizer_class", "GPT2Tokenizer"}};
  if (!tok.chat_template().empty()) config["chat_template"] = tok.chat_template();

  ojson generation{{"_from_model_config", true}};
  if (tok.bos() >= 0) generation["bos_token_id"] = tok.bos();
  if (tok.eos() >= 0) generation["eos_token_id"] = tok.eos();
  if (tok.pad() >= 0) generation["pad_token_id"] = tok.pad();

  HfTokenizerFiles out;
  out.tokenizer_json = dumped(json);
  out.tokenizer_config_json = dumped(config);
  out.generation_config_json = dumped(generation);
  out.bos = tok.bos();
  out.eos = tok.eos();
  out.pad = tok.pad();
  return out;
}

}  // namespace nmkit
