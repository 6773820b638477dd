// ModelSource from a Hugging Face llama folder: config.json (transformers' LlamaConfig fields),
// model.safetensors or the shards model.safetensors.index.json lists, tokenizer.json. Tensors are
// renamed to llama.cpp's GGUF names as its convert_hf_to_gguf.py does, and q/k rows are permuted
// from HF's rotate-halves (NEOX) order to GGUF's adjacent-pairs (NORM) order (docs/design.md 11.1).
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "model/model_source_impl.h"

namespace nmkit::model_source {
namespace {

using json = nlohmann::json;

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<json> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(path + ": cannot open: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  json value = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return Error(path + ": not valid JSON");
  if (!value.is_object()) return Error(path + ": not a JSON object");
  return value;
}

// A short rendering of a JSON value for messages.
std::string shown(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 60 ? text.substr(0, 60) + "..." : text;
}

// config.json's fields, each a one-line Error naming the file and key when missing or mistyped.
class Config {
 public:
  Config(std::string path, json value) : path_(std::move(path)), value_(std::move(value)) {}

  Result<int64_t> count(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Error(path_ + ": no key '" + key + "'");
    }
    if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return Error(path_ + ": '" + key + "' is " + shown(*v) + ", expected a positive integer");
    }
    return v->get<int64_t>();
  }

  Result<double> positive_float(const std::string& key, std::optional<double> fallback = std::nullopt) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Error(path_ + ": no key '" + key + "'");
    }
    if (!v->is_number()) return Error(path_ + ": '" + key + "' is " + shown(*v) + ", expected a number");
    // float32 is what the model computes with: 1e39 is as infinite as 1e400.
    const auto value = static_cast<float>(v->get<double>());
    if (!(value > 0.0f) || !std::isfinite(value)) {
      return Error(path_ + ": '" + key + "' is " + shown(*v) + ", expected a positive finite float32");
    }
    return v->get<double>();
  }

  Result<bool> flag(const std::string& key, bool fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Error(path_ + ": '" + key + "' is " + shown(*v) + ", expected true or false");
    return v->get<bool>();
  }

  const json* find(const std::string& key) const {
    const auto it = value_.find(key);
    return it == value_.end() || it->is_null() ? nullptr : &*it;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  json value_;
};

Status read_params(const Config& c, ModelSource::Impl& impl) {
  const json* type = c.find("model_type");
  if (type == nullptr || !type->is_string()) {
    return Error(c.path() + ": no string 'model_type' (supported: llama)");
  }
  const std::string arch = type->get<std::string>();
  bool supported = false;
  for (const std::string& a : ModelSource::supported_architectures()) supported |= a == arch;
  if (!supported) return Error(c.path() + ": " + unsupported_architecture(arch));
  impl.architecture = arch;

  LlamaParams& p = impl.params;
  const std::pair<const char*, int64_t*> counts[] = {
      {"vocab_size", &p.n_vocab},          {"hidden_size", &p.n_embd},
      {"num_hidden_layers", &p.n_layer},   {"num_attention_heads", &p.n_head},
      {"intermediate_size", &p.n_ff},      {"max_position_embeddings", &p.n_ctx_train}};
  for (const auto& [key, dst] : counts) {
    auto v = c.count(key);
    if (!v.ok()) return v.error();
    *dst = *v;
  }
  auto kv = c.count("num_key_value_heads", p.n_head);  // transformers' default: multi-head attention
  if (!kv.ok()) return kv.error();
  p.n_head_kv = *kv;
  auto eps = c.positive_float("rms_norm_eps");
  if (!eps.ok()) return eps.error();
  p.rms_eps = static_cast<float>(*eps);
  auto theta = c.positive_float("rope_theta", 10000.0);
  if (!theta.ok()) return theta.error();
  p.rope_base = static_cast<float>(*theta);
  auto tied = c.flag("tie_word_embeddings", false);  // transformers' LlamaConfig default
  if (!tied.ok()) return tied.error();
  p.tied_output = *tied;
  if (Status valid = p.validate(); !valid.ok()) return valid.error().with_context(c.path() + ": ");

  // What nmkit's forward pass does not implement is refused rather than run wrongly.
  if (const json* scaling = c.find("rope_scaling")) {
    return Error(c.path() + ": 'rope_scaling' is " + shown(*scaling) + ": rope scaling is not supported");
  }
  if (const json* act = c.find("hidden_act"); act != nullptr && *act != "silu") {
    return Error(c.path() + ": 'hidden_act' is " + shown(*act) + ", only \"silu\" is supported");
  }
  if (auto head_dim = c.count("head_dim", p.head_dim()); !head_dim.ok() || *head_dim != p.head_dim()) {
    if (!head_dim.ok()) return head_dim.error();
    return Error(c.path() + ": 'head_dim' is " + std::to_string(*head_dim) + ", not hidden_size / num_attention_heads = " +
                 std::to_string(p.head_dim()));
  }
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    auto has = c.flag(bias, false);
    if (!has.ok()) return has.error();
    if (*has) return Error(c.path() + ": '" + std::string(bias) + "' is true: biases are not supported");
  }
  return ok_status();
}

// HF name -> (GGUF name, heads to permute by): convert_hf_to_gguf.py's tensor map for llama.
std::optional<std::pair<std::string, int64_t>> gguf_name(const std::string& hf, const LlamaParams& p) {
  static const std::map<std::string, std::string> top = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"}};
  if (const auto it = top.find(hf); it != top.end()) return std::make_pair(it->second, int64_t{0});
  // "model.layers.<digits>.<part>.weight", parsed by hand: std::regex trips GCC 12's
  // -Wmaybe-uninitialized in sanitizer builds.
  const std::string_view prefix = "model.layers.", suffix = ".weight";
  std::string_view rest(hf);
  if (rest.substr(0, prefix.size()) != prefix || rest.size() < prefix.size() + suffix.size() ||
      rest.substr(rest.size() - suffix.size()) != suffix) {
    return std::nullopt;
  }
  rest = rest.substr(prefix.size(), rest.size() - prefix.size() - suffix.size());
  const size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 9) return std::nullopt;
  for (size_t i = 0; i < dot; ++i) {
    if (rest[i] < '0' || rest[i] > '9') return std::nullopt;
  }
  const std::string layer_index(rest.substr(0, dot)), part(rest.substr(dot + 1));
  static const std::map<std::string, std::string> block = {
      {"input_layernorm", "attn_norm"},      {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},        {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"},   {"post_attention_layernorm", "ffn_norm"},
      {"mlp.gate_proj", "ffn_gate"},         {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"}};
  const auto it = block.find(part);
  if (it == block.end()) return std::nullopt;
  const int64_t heads = it->second == "attn_q" ? p.n_head : it->second == "attn_k" ? p.n_head_kv : 0;
  return std::make_pair("blk." + std::to_string(std::stoll(layer_index)) + "." + it->second + ".weight", heads);
}

// The Hugging Face name of a GGUF-named llama tensor (for messages about a missing one).
std::string hf_name_of(const std::string& gguf, const LlamaParams& p) {
  for (int64_t b = -1; b < p.n_layer; ++b) {
    for (const char* hf : {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                           "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                           "mlp.down_proj"}) {
      const std::string name = b < 0 ? "" : "model.layers." + std::to_string(b) + "." + hf + ".weight";
      if (b >= 0 && gguf_name(name, p)->first == gguf) return name;
    }
    if (b >= 0) continue;
    for (const char* hf : {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}) {
      if (gguf_name(hf, p)->first == gguf) return hf;
    }
  }
  return gguf;
}

// A shard's file name from the index: a plain name in the folder (no path separators).
bool plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

}  // namespace

Status open_hf(ModelSource::Impl& impl) {
  const std::string dir = impl.path;
  const std::string config_path = dir + "/config.json";
  if (!is_file(config_path)) {
    return Error(dir + ": not a Hugging Face model folder (no config.json)");
  }
  auto config = read_json(config_path);
  if (!config.ok()) return config.error();
  NMKIT_TRY(read_params(Config(config_path, std::move(*config)), impl));
  const LlamaParams& p = impl.params;

  // HF tensor name -> shard file name.
  std::map<std::string, std::string> weight_map;
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (is_file(index_path)) {
    auto index = read_json(index_path);
    if (!index.ok()) return index.error();
    const auto it = index->find("weight_map");
    if (it == index->end() || !it->is_object()) return Error(index_path + ": no object 'weight_map'");
    for (const auto& [name, file] : it->items()) {
      if (!file.is_string() || !plain_file_name(file.get<std::string>())) {
        return Error(index_path + ": weight_map['" + name + "'] is " + shown(file) + ", expected a file name in the folder");
      }
      weight_map[name] = file.get<std::string>();
    }
  } else if (is_file(dir + "/model.safetensors")) {
    auto file = SafetensorsFile::open(dir + "/model.safetensors");
    if (!file.ok()) return file.error();
    for (const TensorInfo& t : file->tensors()) weight_map[t.name] = "model.safetensors";
  } else {
    return Error(dir + ": no model.safetensors or model.safetensors.index.json");
  }

  std::map<std::string, size_t> shard_of_file;
  std::map<std::string, Shape> shapes;
  for (const auto& [hf, file_name] : weight_map) {
    if (hf.find("rotary_emb.inv_freq") != std::string::npos) continue;  // recomputed, never loaded
    if (hf == "lm_head.weight" && p.tied_output) continue;  // a stored copy of the tied embedding
    auto it = shard_of_file.find(file_name);
    if (it == shard_of_file.end()) {
      auto shard = SafetensorsFile::open(dir + "/" + file_name);
      if (!shard.ok()) return shard.error();
      impl.shards.push_back(std::move(*shard));
      impl.shard_paths.push_back(dir + "/" + file_name);
      it = shard_of_file.emplace(file_name, impl.shards.size() - 1).first;
    }
    const std::string& shard_path = impl.shard_paths[it->second];
    const TensorInfo* info = impl.shards[it->second].find(hf);
    if (info == nullptr) return Error(shard_path + ": no tensor '" + hf + "' (listed in model.safetensors.index.json)");
    if (!is_prunable(info->dtype)) {
      return Error(shard_path + ": tensor '" + hf + "' has dtype " + std::string(dtype_name(info->dtype)) +
                   " (F32, F16 or BF16 are read)");
    }
    const auto name = gguf_name(hf, p);
    if (!name) return Error(shard_path + ": tensor '" + hf + "' is not part of a llama model nmkit runs");
    impl.hf[name->first] = ModelSource::Impl::HfTensor{it->second, hf, name->second};
    shapes[name->first] = info->shape;
  }
  for (const auto& [name, shape] : expected_tensors(p)) {
    const auto it = impl.hf.find(name);
    if (it == impl.hf.end()) {
      return Error(dir + ": tensor '" + hf_name_of(name, p) + "' is missing (num_hidden_layers = " +
                   std::to_string(p.n_layer) + ", tie_word_embeddings = " + (p.tied_output ? "true" : "false") + ")");
    }
    if (shapes[name] != shape) {
      return Error(impl.shard_paths[it->second.shard] + ": tensor '" + it->second.hf_name + "' has shape " +
                   shape_str(shapes[name]) + ", config.json gives " + shape_str(shape));
    }
    impl.names.push_back(name);
  }
  if (impl.hf.size() != impl.names.size()) {
    for (const auto& [name, where] : impl.hf) {
      bool known = false;
      for (const std::string& n : impl.names) known |= n == name;
      if (!known) {
        return Error(impl.shard_paths[where.shard] + ": tensor '" + where.hf_name + "' is beyond the model config.json " +
                     "describes (num_hidden_layers = " + std::to_string(p.n_layer) + ")");
      }
    }
  }
  if (is_file(dir + "/tokenizer.json")) impl.tokenizer_json = dir + "/tokenizer.json";
  impl.files = {config_path};
  if (is_file(index_path)) impl.files.push_back(index_path);
  impl.files.insert(impl.files.end(), impl.shard_paths.begin(), impl.shard_paths.end());
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"}) {
    if (is_file(dir + "/" + name)) impl.files.push_back(dir + "/" + name);
  }
  return ok_status();
}

Result<Tensor> load_hf(const ModelSource::Impl& impl, const ModelSource::Impl::HfTensor& where, std::string_view name) {
  (void)name;
  const SafetensorsFile& shard = impl.shards[where.shard];
  const TensorInfo* info = shard.find(where.hf_name);
  NMKIT_ASSERT(info != nullptr);
  const TensorView view = shard.view(*info);
  Tensor out = Tensor::empty(DType::F32, view.shape);
  const auto n = static_cast<size_t>(view.numel());
  if (where.permute_heads == 0) {
    convert_to_f32(view.dtype, view.data, out.as<float>(), n);
    return out;
  }
  // convert_hf_to_gguf.py's permute: w.reshape(heads, 2, hd/2, K).swapaxes(1, 2).reshape(w.shape),
  // i.e. within head h, GGUF row 2i + s is HF row s*hd/2 + i.
  const int64_t rows = view.shape[0], K = view.shape[1];
  const int64_t hd = rows / where.permute_heads, half = hd / 2;
  const size_t elem = dtype_size(view.dtype);
  float* dst = out.as<float>();
  for (int64_t h = 0; h < where.permute_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t s = 0; s < 2; ++s) {
        const int64_t src_row = h * hd + s * half + i, dst_row = h * hd + 2 * i + s;
        convert_to_f32(view.dtype, view.data + static_cast<size_t>(src_row * K) * elem, dst + dst_row * K,
                       static_cast<size_t>(K));
      }
    }
  }
  return out;
}

}  // namespace nmkit::model_source
