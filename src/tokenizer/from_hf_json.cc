// Tokenizer::from_hf_json: a Hugging Face tokenizer.json (BPE model) read into a TokenizerVocab,
// with the pre-tokenizer recognised as one of the llama.cpp pre types (docs/design.md 11.3).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/hf_regexes.h"
#include "tokenizer/tokenizer_impl.h"

namespace nmkit {
namespace {

using json = nlohmann::json;

using tokenizer_detail::kDefaultRegexes;
using tokenizer_detail::kLlama3Regex;
using tokenizer_detail::kQwen2Regex;

Result<json> read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(path.string() + ": cannot open");
  std::stringstream buffer;
  buffer << in.rdbuf();
  json parsed = json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Error(path.string() + ": not valid JSON");
  return parsed;
}

bool is_type(const json& node, const char* type) {
  return node.is_object() && node.value("type", std::string()) == type;
}

// The pre-tokenizer list (a Sequence flattened; a single one as a list of one).
std::vector<json> pre_tokenizer_list(const json& root) {
  const json& pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json();
  if (is_type(pre, "Sequence") && pre.contains("pretokenizers")) {
    return std::vector<json>(pre["pretokenizers"].begin(), pre["pretokenizers"].end());
  }
  if (pre.is_object()) return {pre};
  return {};
}

std::string split_regex(const json& node) {
  if (!is_type(node, "Split") || !node.contains("pattern")) return "";
  const json& pattern = node["pattern"];
  return pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()
             ? pattern["Regex"].get<std::string>()
             : "";
}

// llama.cpp's pre type for a ByteLevel tokenizer.json, or "" if not one it knows.
std::string detect_pre(const std::vector<json>& list) {
  auto byte_level = [](const json& node, bool use_regex) {
    return is_type(node, "ByteLevel") && node.value("use_regex", true) == use_regex;
  };
  if (list.size() == 1 && byte_level(list[0], true)) return "gpt2";
  if (list.size() == 2 && is_type(list[0], "Digits") &&
      list[0].value("individual_digits", false) && byte_level(list[1], true)) {
    return "smollm";
  }
  // Split pre-tokenizers (isolated), then ByteLevel without its own regex.
  if (list.size() >= 2 && byte_level(list.back(), false)) {
    std::vector<std::string> regexes;
    for (size_t i = 0; i + 1 < list.size(); ++i) {
      if (list[i].value("behavior", std::string()) != "Isolated") return "";
      regexes.push_back(split_regex(list[i]));
    }
    if (regexes == std::vector<std::string>{kLlama3Regex}) return "llama-bpe";
    if (regexes == std::vector<std::string>{kQwen2Regex}) return "qwen2";
    if (regexes == std::vector<std::string>(std::begin(kDefaultRegexes), std::end(kDefaultRegexes))) {
      return "default";
    }
  }
  return "";
}

bool mentions_metaspace(const json& node) {
  if (node.is_string()) return node.get<std::string>().find("\xE2\x96\x81") != std::string::npos;
  if (node.is_object() || node.is_array()) {
    for (const auto& child : node) {
      if (mentions_metaspace(child)) return true;
    }
  }
  return false;
}

// A special token in tokenizer_config.json: "text" or {"content": "text", ...}.
std::string config_token(const json& config, const char* key) {
  if (!config.contains(key)) return "";
  const json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return "";
}

}  // namespace

Result<Tokenizer> Tokenizer::from_hf_json(const std::string& tokenizer_json_path) {
  const std::filesystem::path path(tokenizer_json_path);
  auto parsed = read_json(path);
  if (!parsed.ok()) return parsed.error();
  const json& root = parsed.value();
  auto fail = [&](const std::string& message) { return Error(path.string() + ": " + message); };
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) {
    return fail("no \"model\" object");
  }
  const json& model = root["model"];
  if (model.value("type", std::string("BPE")) != "BPE") {
    return fail("model type '" + model.value("type", std::string()) + "' is not supported (BPE only)");
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) return fail("model has no vocab");

  TokenizerVocab vocab;
  std::vector<bool> present;
  auto place = [&](const std::string& text, int64_t id) -> Status {
    if (id < 0 || id > (1 << 24)) return fail("token " + text + " has id " + std::to_string(id));
    if (static_cast<size_t>(id) >= vocab.tokens.size()) {
      vocab.tokens.resize(id + 1);
      present.resize(id + 1, false);
    }
    if (present[id] && vocab.tokens[id] != text) {
      return fail("id " + std::to_string(id) + " names two tokens");
    }
    vocab.tokens[id] = text;
    present[id] = true;
    return ok_status();
  };
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer()) return fail("vocab entry '" + text + "' has no integer id");
    NMKIT_TRY(place(text, id.get<int64_t>()));
  }
  std::vector<int32_t> types;
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const json& added : root["added_tokens"]) {
      if (!added.contains("id") || !added.contains("content")) return fail("added token without id/content");
      const int64_t id = added["id"].get<int64_t>();
      NMKIT_TRY(place(added["content"].get<std::string>(), id));
      if (types.size() <= static_cast<size_t>(id)) types.resize(id + 1, 0);
      types[id] = added.value("special", false) ? static_cast<int32_t>(TokenType::kControl)
                                                : static_cast<int32_t>(TokenType::kUserDefined);
    }
  }
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (!present[id]) return fail("token id " + std::to_string(id) + " is missing (ids must be dense)");
  }
  types.resize(vocab.tokens.size(), 0);
  const bool byte_fallback = model.value("byte_fallback", false);
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (types[id] != 0) continue;
    const std::string& text = vocab.tokens[id];
    const bool is_byte = byte_fallback && text.size() == 6 && text.rfind("<0x", 0) == 0 && text[5] == '>';
    types[id] = static_cast<int32_t>(is_byte ? TokenType::kByte : TokenType::kNormal);
  }
  vocab.token_types = std::move(types);

  if (model.contains("merges") && model["merges"].is_array()) {
    for (const json& merge : model["merges"]) {
      if (merge.is_string()) {
        vocab.merges.push_back(merge.get<std::string>());
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
        vocab.merges.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
      } else {
        return fail("a merge is neither \"a b\" nor [\"a\", \"b\"]");
      }
    }
  }

  const std::vector<json> pre_list = pre_tokenizer_list(root);
  bool has_byte_level = false;
  for (const json& node : pre_list) has_byte_level = has_byte_level || is_type(node, "ByteLevel");
  if (has_byte_level) {
    vocab.model = "gpt2";
    vocab.pre = detect_pre(pre_list);
    if (vocab.pre.empty()) {
      return fail("pre_tokenizer " + root["pre_tokenizer"].dump().substr(0, 200) +
                  " is not one of the supported forms (smollm, gpt2, llama3, qwen2)");
    }
  } else if (mentions_metaspace(root.value("normalizer", json())) ||
             mentions_metaspace(root.value("pre_tokenizer", json()))) {
    vocab.model = "llama";
    // Scores from the merge order, the order sentencepiece's scores give the merges when
    // `tokenizers` converts a SentencePiece model: earlier merge, higher score.
    vocab.scores.assign(vocab.tokens.size(), -1e9f);
    TokenIndex index;
    for (size_t id = 0; id < vocab.tokens.size(); ++id) index.emplace(vocab.tokens[id], static_cast<int32_t>(id));
    for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
      const std::string& merge = vocab.merges[rank];
      const size_t space = merge.find(' ', 1);
      if (space == std::string::npos) continue;
      auto it = index.find(merge.substr(0, space) + merge.substr(space + 1));
      if (it != index.end() && vocab.scores[it->second] == -1e9f) {
        vocab.scores[it->second] = -static_cast<float>(rank);
      }
    }
    vocab.merges.clear();
    const json normalizer = root.value("normalizer", json());
    const json pre = root.value("pre_tokenizer", json());
    vocab.add_space_prefix = normalizer.dump().find("\"Prepend\"") != std::string::npos ||
                             (is_type(pre, "Metaspace") &&
                              pre.value("prepend_scheme", std::string("always")) != "never" &&
                              pre.value("add_prefix_space", true));
  } else {
    return fail("neither a ByteLevel nor a SentencePiece ('\xE2\x96\x81') tokenizer");
  }

  // Defaults as llama.cpp's for a GGUF without the keys; tokenizer_config.json overrides them.
  vocab.add_bos = vocab.model == "llama" || vocab.pre == "llama-bpe";
  auto id_of = [&](const std::string& text) -> int32_t {
    for (size_t id = 0; id < vocab.tokens.size(); ++id) {
      if (vocab.tokens[id] == text) return static_cast<int32_t>(id);
    }
    return -1;
  };
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    vocab.unk = id_of(model["unk_token"].get<std::string>());
  }
  const std::filesystem::path config_path = path.parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    auto config = read_json(config_path);
    if (!config.ok()) return config.error();
    const json& c = config.value();
    const std::pair<const char*, int32_t*> specials[] = {
        {"bos_token", &vocab.bos}, {"eos_token", &vocab.eos}, {"unk_token", &vocab.unk}, {"pad_token", &vocab.pad}};
    for (const auto& [key, field] : specials) {
      const std::string text = config_token(c, key);
      if (!text.empty()) *field = id_of(text);
    }
    if (c.contains("add_bos_token") && c["add_bos_token"].is_boolean()) vocab.add_bos = c["add_bos_token"].get<bool>();
    if (c.contains("add_eos_token") && c["add_eos_token"].is_boolean()) vocab.add_eos = c["add_eos_token"].get<bool>();
    if (c.contains("chat_template") && c["chat_template"].is_string()) {
      vocab.chat_template = c["chat_template"].get<std::string>();
    }
  }
  if (vocab.add_bos && vocab.bos < 0) vocab.add_bos = false;
  if (vocab.add_eos && vocab.eos < 0) vocab.add_eos = false;
  auto created = Tokenizer::create(std::move(vocab));
  if (!created.ok()) return created.error().with_context(path.string() + ": ");
  return created;
}

}  // namespace nmkit
