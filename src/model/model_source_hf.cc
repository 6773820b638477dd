// ModelSource from a Hugging Face folder of a family nmkit runs: config.json (transformers' config
// fields; the family's own in its file, family_*.cc), model.safetensors or the shards
// model.safetensors.index.json lists, tokenizer.json. Tensors are renamed to llama.cpp's GGUF names
// as its convert_hf_to_gguf.py does; for rope-NORM families (llama, Mistral) q/k rows are permuted
// from HF's rotate-halves (NEOX) order to GGUF's adjacent-pairs (NORM) order (docs/design.md 11.1),
// and Gemma's norm weights get their 1 added (docs/design.md 11.8).
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "model/family.h"
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

using model::HfConfig;
using model::shown_json;

// config.json's rope_scaling: none, "default", "linear" (rope_scale) or "llama3" (the factors
// convert_hf_to_gguf.py writes as rope_freqs.weight: llama3_rope_factor).
Status read_rope_scaling(const HfConfig& c, LlamaParams& p) {
  const auto* scaling = c.find("rope_scaling");
  if (scaling == nullptr) return ok_status();
  const auto bad = [&] {
    return Error(c.path() + ": 'rope_scaling' is " + shown_json(*scaling) +
                 ": rope scaling other than linear and llama3 is not supported");
  };
  if (!scaling->is_object()) return bad();
  const auto type_it = scaling->contains("rope_type") ? scaling->find("rope_type") : scaling->find("type");
  if (type_it == scaling->end() || !type_it->is_string()) return bad();
  const std::string type = type_it->get<std::string>();
  const auto number = [&](const char* key, double fallback) {
    const auto it = scaling->find(key);
    return it != scaling->end() && it->is_number() ? it->get<double>() : fallback;
  };
  const double factor = number("factor", type == "llama3" ? 8.0 : 1.0);
  if (!(factor > 0)) return bad();
  if (type == "default") return ok_status();
  if (type == "linear") {
    p.rope_scale = static_cast<float>(1.0 / factor);
    return ok_status();
  }
  if (type != "llama3") return bad();
  const double low = number("low_freq_factor", 1.0), high = number("high_freq_factor", 4.0);
  const double old_context = number("original_max_position_embeddings", 8192.0);
  if (!(high > low)) return bad();
  p.rope_factors.clear();
  for (int64_t i = 0; i < p.head_dim() / 2; ++i) {
    p.rope_factors.push_back(static_cast<float>(model::llama3_rope_factor(p, i, factor, low, high, old_context)));
  }
  return ok_status();
}

Status read_params(const HfConfig& c, ModelSource::Impl& impl) {
  std::string types;
  for (const std::string& t : model::hf_model_types()) types += (types.empty() ? "" : ", ") + t;
  const auto* type = c.find("model_type");
  if (type == nullptr || !type->is_string()) {
    return Error(c.path() + ": no string 'model_type' (supported: " + types + ")");
  }
  const std::string model_type = type->get<std::string>();
  const model::Family* family = model::find_hf_family(model_type);
  if (family == nullptr) {
    return Error(c.path() + ": model_type '" + model_type + "' is not supported (supported: " + types + ")");
  }
  impl.architecture = family->gguf_arch;

  LlamaParams& p = impl.params;
  p.arch = family->name;
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
  auto head_dim = c.count("head_dim", int64_t{0});
  if (!head_dim.ok()) return head_dim.error();
  if (*head_dim > 0 && *head_dim * p.n_head != p.n_embd) p.n_embd_head = *head_dim;
  auto eps = c.positive_float("rms_norm_eps");
  if (!eps.ok()) return eps.error();
  p.rms_eps = static_cast<float>(*eps);
  auto theta = c.positive_float("rope_theta", 10000.0);
  if (!theta.ok()) return theta.error();
  p.rope_base = static_cast<float>(*theta);
  auto tied = c.flag("tie_word_embeddings", family->hf_tied_default);
  if (!tied.ok()) return tied.error();
  p.tied_output = *tied;
  NMKIT_TRY(read_rope_scaling(c, p));
  for (const char* key : {"hidden_act", "hidden_activation"}) {  // Gemma's config names it the second way
    if (const auto* act = c.find(key); act != nullptr && *act != family->hf_activation) {
      return Error(c.path() + ": '" + key + "' is " + shown_json(*act) + ", only \"" + family->hf_activation +
                   "\" is supported for model_type " + model_type);
    }
  }
  if (family->read_hf) NMKIT_TRY(family->read_hf(c, p));
  if (Status valid = p.validate(); !valid.ok()) return valid.error().with_context(c.path() + ": ");
  return ok_status();
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
  NMKIT_TRY(read_params(HfConfig(config_path, std::move(*config)), impl));
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
        return Error(index_path + ": weight_map['" + name + "'] is " + shown_json(file) + ", expected a file name in the folder");
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

  std::map<std::string, model::ModelTensorName> by_hf_name;
  for (model::ModelTensorName& t : model::model_tensor_names(p)) by_hf_name.emplace(t.hf, std::move(t));
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
    const auto known = by_hf_name.find(hf);
    if (known == by_hf_name.end()) {
      return Error(shard_path + ": tensor '" + hf + "' is not part of a " + p.arch + " model nmkit runs (num_hidden_layers = " +
                   std::to_string(p.n_layer) + ")");
    }
    const model::ModelTensorName& t = known->second;
    impl.hf[t.gguf] = ModelSource::Impl::HfTensor{it->second, hf, t.permute_heads, t.plus_one};
    shapes[t.gguf] = info->shape;
  }
  for (const auto& [hf, t] : by_hf_name) {
    const auto it = impl.hf.find(t.gguf);
    if (it == impl.hf.end()) {
      return Error(dir + ": tensor '" + hf + "' is missing (num_hidden_layers = " + std::to_string(p.n_layer) +
                   ", tie_word_embeddings = " + (p.tied_output ? "true" : "false") + ")");
    }
    if (shapes[t.gguf] != t.shape) {
      return Error(impl.shard_paths[it->second.shard] + ": tensor '" + hf + "' has shape " + shape_str(shapes[t.gguf]) +
                   ", config.json gives " + shape_str(t.shape));
    }
  }
  for (const auto& [name, shape] : expected_tensors(p)) impl.names.push_back(name);
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
    if (where.plus_one) {  // Gemma's RMSNorm weight w stands for 1 + w (convert_hf_to_gguf.py adds the 1)
      for (size_t i = 0; i < n; ++i) out.as<float>()[i] += 1.0f;
    }
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
