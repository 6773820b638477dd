// write_model_hf: a LlamaModel saved as a Hugging Face folder of its family (config.json, model.safetensors,
// tokenizer files), built in a temporary folder beside the target and renamed into place only when
// complete (docs/design.md sections 10.12 and 11.1).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nmkit/files.h"
#include "nmkit/gguf.h"
#include "nmkit/model_write.h"

#include "model/family.h"

namespace nmkit {
namespace {

using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

// What write_model_hf writes or copies: the only names an existing folder may hold to be replaced.
const std::set<std::string>& written_names() {
  static const std::set<std::string> names{"config.json",           "model.safetensors",     "tokenizer.json",
                                           "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"};
  return names;
}
constexpr const char* kCopiedFromHf[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                                         "special_tokens_map.json"};

std::string errno_text(int err) { return std::strerror(err); }

// A float32 hyper-parameter as the shortest decimal that reads back to the same float (1e-05, not
// 9.999999747378752e-06), so config.json -> float gives the GGUF's value exactly.
double shortest(float value) {
  char text[64];
  const auto end = std::to_chars(text, text + sizeof(text), value).ptr;
  return std::strtod(std::string(text, end).c_str(), nullptr);
}

const char* torch_dtype(DType dtype) {
  return dtype == DType::F32 ? "float32" : dtype == DType::F16 ? "float16" : "bfloat16";
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(path + ": cannot open: " + errno_text(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error(path + ": read failed");
  return text.str();
}

Status write_text(const std::string& path, const std::string& content) {
  auto file = prepare_text_file(path, content);
  if (!file.ok()) return file.error();
  return file->commit();
}

// config.json's rope_scaling of a llama3 scaling from its factors (rope_freqs.weight), when one gives
// them back to float precision; nullopt otherwise. factor: the largest; low_freq_factor 1 (every Llama
// 3.x's); high_freq_factor and the original context from two factors between 1 and `factor`, whose
// smooth = (1/f - 1/factor) / (1 - 1/factor) = (context / wavelen - 1) / (high - 1) is linear in
// both, else Llama 3.x's 4 and 8192.
std::optional<ojson> llama3_scaling(const LlamaParams& p) {
  const std::vector<float>& f = p.rope_factors;
  const double factor = *std::max_element(f.begin(), f.end());
  double high = 4, old_context = 8192;
  std::vector<std::pair<double, double>> smooth;  // (1 / wavelen, smooth)
  for (size_t i = 0; i < f.size(); ++i) {
    if (!(f[i] > 1.0f + 1e-6f && f[i] < factor * (1 - 1e-6))) continue;
    const float freq = 1.0f / std::pow(p.rope_base, static_cast<float>(2 * i) / static_cast<float>(p.head_dim()));
    const double s = (1 / static_cast<double>(f[i]) - 1 / factor) / (1 - 1 / factor);
    smooth.emplace_back(static_cast<double>(freq) / (2 * M_PI), s);
  }
  if (smooth.size() >= 2) {  // s (high - 1) - context / wavelen = -1 at two points
    const auto [x1, s1] = smooth.front();
    const auto [x2, s2] = smooth.back();
    const double det = -s1 * x2 + s2 * x1;
    if (det == 0) return std::nullopt;
    const double a = (x2 - x1) / det;  // high - 1
    old_context = static_cast<double>(std::llround((s1 * a + 1) / x1));
    high = 1 + std::round(a * 1e6) / 1e6;
  }
  for (size_t i = 0; i < f.size(); ++i) {
    const double expect = model::llama3_rope_factor(p, static_cast<int64_t>(i), factor, 1, high, old_context);
    if (std::fabs(expect - f[i]) > 1e-5 * expect) return std::nullopt;
  }
  return ojson{{"rope_type", "llama3"}, {"factor", factor}, {"low_freq_factor", 1.0}, {"high_freq_factor", high},
               {"original_max_position_embeddings", static_cast<int64_t>(old_context)}};
}

// config.json for a GGUF source: transformers' config fields of the model's family from the parameters.
Result<std::string> config_json(const LlamaParams& p, DType dtype, const HfTokenizerFiles* tokens) {
  const model::Family& family = model::family_of(p);
  ojson scaling;  // null: none
  if (!p.rope_factors.empty()) {
    auto llama3 = llama3_scaling(p);
    if (!llama3) return Error("rope_freqs.weight holds factors of no llama3 rope scaling config.json can state");
    scaling = *llama3;
  } else if (p.rope_scale != 1.0f) {
    scaling = ojson{{"rope_type", "linear"}, {"factor", shortest(1.0f / p.rope_scale)}};
  }
  ojson c{{"architectures", {family.hf_class}},
          {"model_type", family.hf_model_type},
          {"vocab_size", p.n_vocab},
          {"hidden_size", p.n_embd},
          {"intermediate_size", p.n_ff},
          {"num_hidden_layers", p.n_layer},
          {"num_attention_heads", p.n_head},
          {"num_key_value_heads", p.n_head_kv},
          {"head_dim", p.head_dim()},
          {"hidden_act", family.hf_activation},
          {"max_position_embeddings", p.n_ctx_train},
          {"rms_norm_eps", shortest(p.rms_eps)},
          {"rope_theta", shortest(p.rope_base)},
          {"rope_scaling", scaling},
          {"tie_word_embeddings", p.tied_output},
          {"torch_dtype", torch_dtype(dtype)}};
  if (family.write_hf) family.write_hf(p, c);
  if (tokens != nullptr) {
    if (tokens->bos >= 0) c["bos_token_id"] = tokens->bos;
    if (tokens->eos >= 0) c["eos_token_id"] = tokens->eos;
    if (tokens->pad >= 0) c["pad_token_id"] = tokens->pad;
  }
  return c.dump(2) + "\n";
}

// Where `dir` may be written: an existing folder only if it holds nothing but written_names().
Result<bool> check_target(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    return Error(dir + ": " + errno_text(errno));
  }
  if (!S_ISDIR(st.st_mode)) return Error(dir + ": exists and is not a folder (a Hugging Face model is a folder)");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (written_names().count(name) == 0) {
      return Error(dir + ": the folder holds '" + name +
                   "', which nmkit does not write: refusing to replace it (give a new or empty folder)");
    }
  }
  if (ec) return Error(dir + ": cannot list the folder: " + ec.message());
  return true;
}

}  // namespace

Status check_hf_output_folder(const std::string& dir_given) {
  std::string dir = dir_given;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  auto exists = check_target(dir);
  if (!exists.ok()) return exists.error();
  return ok_status();
}

namespace {

// The model's tensor of GGUF name `gguf`, or nullopt.
std::optional<model::ModelTensorName> find_tensor_name(const std::string& gguf, const LlamaParams& p) {
  for (model::ModelTensorName& t : model::model_tensor_names(p)) {
    if (t.gguf == gguf) return std::move(t);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::pair<std::string, int64_t>> hf_tensor_name(const std::string& gguf, const LlamaParams& p) {
  const auto t = find_tensor_name(gguf, p);
  if (!t) return std::nullopt;
  return std::make_pair(t->hf, t->permute_heads);
}

std::optional<NamedTensor> hf_tensor_from_gguf(const NamedTensor& gguf, const LlamaParams& p) {
  const auto t = find_tensor_name(gguf.name, p);
  if (!t) return std::nullopt;
  Tensor rows = t->permute_heads > 0 ? hf_rows_from_gguf(gguf.tensor, t->permute_heads) : Tensor::copy_of(gguf.tensor.view());
  if (t->plus_one) {  // Gemma's RMSNorm adds the 1 at run time (docs/design.md 11.8)
    for (int64_t i = 0; i < rows.numel(); ++i) rows.as<float>()[i] -= 1.0f;
  }
  return NamedTensor{t->hf, std::move(rows)};
}

Tensor hf_rows_from_gguf(const Tensor& t, int64_t heads) {
  const int64_t rows = t.rows(), K = t.cols(), hd = rows / heads, half = hd / 2;
  Tensor out = Tensor::empty(DType::F32, t.shape());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t i = 0; i < half; ++i) {
        std::memcpy(out.as<float>() + (h * hd + s * half + i) * K, t.as<float>() + (h * hd + 2 * i + s) * K,
                    static_cast<size_t>(K) * sizeof(float));
      }
    }
  }
  return out;
}

Status write_model_hf(const std::string& dir_given, const TensorsToWrite& tensors, const ModelSource& source,
                      const ModelWriteOptions& options) {
  if (options.dtype != DType::F32 && options.dtype != DType::F16 && options.dtype != DType::BF16) {
    return Error(dir_given + ": Hugging Face output dtype " + std::string(dtype_name(options.dtype)) +
                 " is not F32, F16 or BF16");
  }
  std::string dir = dir_given;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  {  // write through a symlink to its folder, as files are written through theirs
    std::error_code ec;
    if (fs::is_symlink(dir, ec)) {
      const fs::path target = fs::canonical(dir, ec);
      if (ec) return Error(dir + ": a symlink that leads nowhere: " + ec.message());
      dir = target.string();
    }
  }
  NMKIT_TRY(check_target(dir));
  const LlamaParams& p = tensors.params;

  // Everything that can fail on the inputs fails before anything is written.
  std::optional<HfTokenizerFiles> tokens;
  std::string config;
  std::vector<std::pair<std::string, std::string>> copied;  // name, bytes
  if (const GgufFile* gguf = source.gguf()) {
    // A SentencePiece vocabulary (Gemma's) has no tokenizer.json writer yet, and a file may have no
    // tokenizer: the folder then holds the model without tokenizer files.
    const GgufValue* model_type = gguf->find_key("tokenizer.ggml.model");
    if (model_type != nullptr && model_type->string != "llama") {
      auto files = hf_tokenizer_files(*gguf, p.n_ctx_train);
      if (!files.ok()) return files.error();
      tokens.emplace(std::move(*files));
    }
    auto written = config_json(p, options.dtype, tokens ? &*tokens : nullptr);
    if (!written.ok()) return written.error().with_context(dir + ": ");
    config = std::move(*written);
  } else {
    const std::string src_config = source.path() + "/config.json";
    auto text = read_file(src_config);
    if (!text.ok()) return text.error();
    ojson c = ojson::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (c.is_discarded() || !c.is_object()) return Error(src_config + ": not a JSON object");
    c["torch_dtype"] = torch_dtype(options.dtype);
    config = c.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
    for (const char* name : kCopiedFromHf) {
      const std::string path = source.path() + "/" + name;
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) continue;
      auto bytes = read_file(path);
      if (!bytes.ok()) return bytes.error();
      copied.emplace_back(name, std::move(*bytes));
    }
  }

  auto folder = PendingFolder::create(dir);
  if (!folder.ok()) return folder.error();
  const std::string tmp = folder->path();
  NMKIT_TRY(write_model_hf_weights(tmp + "/model.safetensors", tensors, options));
  NMKIT_TRY(write_text(tmp + "/config.json", config));
  if (tokens) {
    NMKIT_TRY(write_text(tmp + "/tokenizer.json", tokens->tokenizer_json));
    NMKIT_TRY(write_text(tmp + "/tokenizer_config.json", tokens->tokenizer_config_json));
    NMKIT_TRY(write_text(tmp + "/generation_config.json", tokens->generation_config_json));
  }
  for (const auto& [name, bytes] : copied) NMKIT_TRY(write_text(tmp + "/" + name, bytes));
  // The target is checked again at the rename: another writer may have made it meanwhile.
  return folder->commit([](const std::string& target) { return check_hf_output_folder(target); });
}

Status write_model_hf(const std::string& dir, const LlamaModel& model, const ModelSource& source, DType dtype,
                      const std::function<void(size_t, size_t, const OutputTensor&)>& on_tensor) {
  auto tensors = model_tensors(model);
  if (!tensors.ok()) return tensors.error().with_context(dir + ": ");
  ModelWriteOptions options;
  options.dtype = dtype;
  options.on_tensor = on_tensor;
  return write_model_hf(dir, *tensors, source, options);
}

}  // namespace nmkit
