// Writing a model's tensors (nmkit/model_write.h): as GGUF, or as Hugging Face-named safetensors; the
// tensors are produced one at a time by the writers' fills, converted to the output dtype with a
// check that every value fits.
#include "nmkit/model_write.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "model/family.h"
#include "model/model_source_impl.h"  // expected_tensors

#include "model/family.h"

namespace nmkit {
namespace {

// llama.cpp's general.file_type (llama_ftype) of an all-F32/F16/BF16 file.
Result<uint32_t> file_type_of(DType dtype, const std::string& path) {
  switch (dtype) {
    case DType::F32: return 0u;    // LLAMA_FTYPE_ALL_F32
    case DType::F16: return 1u;    // LLAMA_FTYPE_MOSTLY_F16
    case DType::BF16: return 32u;  // LLAMA_FTYPE_MOSTLY_BF16
    default:
      return Error(path + ": output dtype " + std::string(dtype_name(dtype)) + " is not F32, F16 or BF16");
  }
}

// The dtype a tensor is written in: 2-D ones as asked, norms F32.
DType written_dtype(const Shape& shape, DType dtype) { return shape.size() == 2 ? dtype : DType::F32; }

// src (f32, `shape`) converted into dst as `dtype`, refusing a finite value that becomes an infinity.
Status convert_checked(const float* src, const Shape& shape, DType dtype, std::byte* dst, const std::string& where) {
  const auto n = static_cast<size_t>(shape_numel(shape));
  convert_from_f32(dtype, src, dst, n);
  if (dtype == DType::F32) return ok_status();
  // F16 and BF16: an all-ones exponent is an infinity or NaN.
  const uint16_t exponent = dtype == DType::F16 ? 0x7C00 : 0x7F80;
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, dst + 2 * i, 2);
    if ((bits & exponent) != exponent || !std::isfinite(src[i])) continue;
    const auto cols = static_cast<size_t>(shape.size() == 2 ? shape[1] : static_cast<int64_t>(n));
    char value[32];
    const std::string shortest(value, std::to_chars(value, value + sizeof(value), src[i]).ptr);
    return Error(where + ": element [" + std::to_string(i / cols) + ", " + std::to_string(i % cols) + "] = " +
                 shortest + " does not fit " + std::string(dtype_name(dtype)) + " (largest " +
                 (dtype == DType::F16 ? "65504): write f32 or bf16" : "3.39e38): write f32"));
  }
  return ok_status();
}

// An output tensor whose fill loads `name` (f32), turns it into its Hugging Face form when `hf`
// (hf_tensor_from_gguf: q/k rows, the family's norm offset), and converts it.
OutputTensor output_tensor(const std::string& path, const TensorsToWrite& model, const std::string& name,
                           const std::string& written_name, const Shape& shape, bool hf, DType dtype) {
  OutputTensor t;
  t.name = written_name;
  t.shape = shape;
  t.dtype = written_dtype(shape, dtype);
  t.fill = [&model, name, hf, path, written_name, shape, to = t.dtype](std::byte* dst) -> Status {
    auto loaded = model.load(name);
    if (!loaded.ok()) return loaded.error().with_context(path + ": ");
    Tensor tensor = std::move(*loaded);
    if (hf) {
      auto converted = hf_tensor_from_gguf(NamedTensor{name, std::move(tensor)}, model.params);
      if (!converted) return Error(path + ": tensor '" + name + "' has no Hugging Face " + model.params.arch + " name");
      tensor = std::move(converted->tensor);
    }
    if (tensor.shape() != shape) {
      return Error(path + ": tensor '" + name + "' has shape " + shape_str(tensor.shape()) + ", not " + shape_str(shape));
    }
    return convert_checked(tensor.as<float>(), shape, to, dst, path + ": tensor '" + written_name + "'");
  };
  return t;
}

// A GGUF source's own tensor order (llama.cpp's converter has its own; it is kept).
std::vector<std::pair<std::string, Shape>> in_source_order(std::vector<std::pair<std::string, Shape>> tensors,
                                                           const ModelSource& source) {
  const GgufFile* gguf = source.gguf();
  if (gguf == nullptr) return tensors;
  std::map<std::string, size_t> position;
  for (const GgufTensorInfo& info : gguf->tensors()) position.emplace(info.name, position.size());
  const auto at = [&position](const std::string& name) {
    const auto it = position.find(name);
    return it == position.end() ? position.size() : it->second;
  };
  std::stable_sort(tensors.begin(), tensors.end(), [&](const auto& a, const auto& b) { return at(a.first) < at(b.first); });
  return tensors;
}

// The keys llama.cpp reads for the model's family under its GGUF architecture's prefix, as
// llama.cpp's converter writes them (docs/design.md 11.8), for a Hugging Face source.
std::vector<GgufKeyValue> family_metadata(const LlamaParams& p, const std::string& name) {
  const model::Family& family = model::family_of(p);
  const std::string k = std::string(family.gguf_arch) + ".";
  auto u32 = [](int64_t v) { return GgufValue::of_uint32(static_cast<uint32_t>(v)); };
  std::vector<GgufKeyValue> metadata = {{"general.architecture", GgufValue::of_string(family.gguf_arch)},
                                        {"general.name", GgufValue::of_string(name)},
                                        {k + "vocab_size", u32(p.n_vocab)},
                                        {k + "context_length", u32(p.n_ctx_train)},
                                        {k + "embedding_length", u32(p.n_embd)},
                                        {k + "block_count", u32(p.n_layer)},
                                        {k + "feed_forward_length", u32(p.n_ff)},
                                        {k + "rope.dimension_count", u32(p.head_dim())},
                                        {k + "attention.head_count", u32(p.n_head)},
                                        {k + "attention.head_count_kv", u32(p.n_head_kv)},
                                        {k + "attention.key_length", u32(p.head_dim())},
                                        {k + "attention.value_length", u32(p.head_dim())},
                                        {k + "attention.layer_norm_rms_epsilon", GgufValue::of_float32(p.rms_eps)},
                                        {k + "rope.freq_base", GgufValue::of_float32(p.rope_base)}};
  if (p.rope_scale != 1.0f) {
    metadata.push_back({k + "rope.scaling.type", GgufValue::of_string("linear")});
    metadata.push_back({k + "rope.scaling.factor", GgufValue::of_float32(1.0f / p.rope_scale)});
  }
  if (family.write_gguf) family.write_gguf(p, metadata);
  return metadata;
}

}  // namespace

TensorsToWrite source_tensors(const ModelSource& source) { return {source.params(), source.loader()}; }

Result<TensorsToWrite> model_tensors(const LlamaModel& model) {
  auto named = model.tensors();
  if (!named.ok()) return named.error();
  struct Held {
    std::mutex mutex;
    std::map<std::string, Tensor> tensors;
  };
  auto held = std::make_shared<Held>();
  for (NamedTensor& t : *named) held->tensors.emplace(t.name, std::move(t.tensor));
  TensorsToWrite out{model.params(), [held](const std::string& name) -> Result<Tensor> {
                     std::lock_guard lock(held->mutex);
                     auto node = held->tensors.extract(name);
                     if (node.empty()) return Error("tensor '" + name + "' was already written or is not in the model");
                     return std::move(node.mapped());
                   }};
  return out;
}

uint64_t model_file_bytes(const LlamaParams& params, DType dtype) {
  uint64_t bytes = 0;
  for (const auto& [name, shape] : model_source::expected_tensors(params)) {
    bytes += static_cast<uint64_t>(shape_numel(shape)) * dtype_size(written_dtype(shape, dtype));
  }
  return bytes;
}

std::vector<GgufKeyValue> gguf_tokenizer_metadata(const Tokenizer& tokenizer) {
  const TokenizerVocab& v = tokenizer.vocab();
  std::vector<GgufKeyValue> out;
  const auto strings = [](const std::vector<std::string>& items) {
    std::vector<GgufValue> values;
    values.reserve(items.size());
    for (const std::string& s : items) values.push_back(GgufValue::of_string(s));
    return GgufValue::of_array(GgufType::String, std::move(values));
  };
  out.push_back({"tokenizer.ggml.model", GgufValue::of_string(v.model)});
  if (!v.pre.empty()) out.push_back({"tokenizer.ggml.pre", GgufValue::of_string(v.pre)});
  out.push_back({"tokenizer.ggml.tokens", strings(v.tokens)});
  std::vector<GgufValue> types;
  types.reserve(v.tokens.size());
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const int32_t type = v.token_types.empty() ? static_cast<int32_t>(TokenType::kNormal) : v.token_types[id];
    types.push_back(GgufValue::of_int32(type));
  }
  out.push_back({"tokenizer.ggml.token_type", GgufValue::of_array(GgufType::I32, std::move(types))});
  if (v.model == "gpt2") out.push_back({"tokenizer.ggml.merges", strings(v.merges)});
  if (!v.scores.empty()) {
    std::vector<GgufValue> scores;
    for (const float s : v.scores) scores.push_back(GgufValue::of_float32(s));
    out.push_back({"tokenizer.ggml.scores", GgufValue::of_array(GgufType::F32, std::move(scores))});
  }
  const std::pair<const char*, int32_t> ids[] = {{"tokenizer.ggml.bos_token_id", v.bos},
                                                 {"tokenizer.ggml.eos_token_id", v.eos},
                                                 {"tokenizer.ggml.unknown_token_id", v.unk},
                                                 {"tokenizer.ggml.padding_token_id", v.pad}};
  for (const auto& [key, id] : ids) {
    if (id >= 0) out.push_back({key, GgufValue::of_uint32(static_cast<uint32_t>(id))});
  }
  out.push_back({"tokenizer.ggml.add_bos_token", GgufValue::of_bool(v.add_bos)});
  if (v.add_eos) out.push_back({"tokenizer.ggml.add_eos_token", GgufValue::of_bool(true)});  // llama.cpp: false when absent
  if (v.model == "llama") out.push_back({"tokenizer.ggml.add_space_prefix", GgufValue::of_bool(v.add_space_prefix)});
  if (!v.chat_template.empty()) out.push_back({"tokenizer.chat_template", GgufValue::of_string(v.chat_template)});
  return out;
}

Result<std::vector<GgufKeyValue>> model_gguf_metadata(const LlamaParams& params, const ModelSource& source) {
  if (const GgufFile* gguf = source.gguf()) return gguf->metadata();
  std::string name = std::filesystem::path(source.path()).filename().string();
  if (name.empty()) name = std::filesystem::path(source.path()).parent_path().filename().string();
  std::vector<GgufKeyValue> metadata = family_metadata(params, name);
  if (!source.tokenizer_json().empty()) {
    auto tokenizer = Tokenizer::from_hf_json(source.tokenizer_json());
    if (!tokenizer.ok()) return tokenizer.error();
    for (GgufKeyValue& kv : gguf_tokenizer_metadata(*tokenizer)) metadata.push_back(std::move(kv));
  }
  return metadata;
}

// Llama 3.x's rope factors as the tensor llama.cpp reads them (rope_freqs.weight, F32), when the
// model has them: a GGUF source's or those an HF config's llama3 rope_scaling implies.
std::optional<OutputTensor> rope_factors_tensor(const LlamaParams& p) {
  if (p.rope_factors.empty()) return std::nullopt;
  OutputTensor t;
  t.name = "rope_freqs.weight";
  t.dtype = DType::F32;
  t.shape = {static_cast<int64_t>(p.rope_factors.size())};
  t.fill = [factors = p.rope_factors](std::byte* dst) -> Status {
    std::memcpy(dst, factors.data(), factors.size() * sizeof(float));
    return ok_status();
  };
  return t;
}

Status write_model_gguf(const std::string& path, const TensorsToWrite& model, const ModelSource& source,
                        const ModelWriteOptions& options) {
  auto file_type = file_type_of(options.dtype, path);
  if (!file_type.ok()) return file_type.error();
  GgufWriteOptions write_options;
  if (const GgufFile* gguf = source.gguf()) write_options.alignment = gguf->alignment();
  auto source_metadata = model_gguf_metadata(model.params, source);
  if (!source_metadata.ok()) return source_metadata.error();
  std::vector<GgufKeyValue> metadata = std::move(*source_metadata);
  bool has_file_type = false;
  for (GgufKeyValue& kv : metadata) {
    if (kv.key == "general.file_type") {
      kv.value = GgufValue::of_uint32(*file_type);
      has_file_type = true;
    }
  }
  if (!has_file_type) metadata.push_back({"general.file_type", GgufValue::of_uint32(*file_type)});
  auto expected = model_source::expected_tensors(model.params);
  std::optional<OutputTensor> freqs = rope_factors_tensor(model.params);
  if (freqs) expected.emplace_back(freqs->name, freqs->shape);
  std::vector<OutputTensor> tensors;
  for (const auto& [name, shape] : in_source_order(std::move(expected), source)) {
    if (freqs && name == freqs->name) tensors.push_back(*freqs);
    else tensors.push_back(output_tensor(path, model, name, name, shape, false, options.dtype));
  }
  write_options.on_tensor = options.on_tensor;
  return write_gguf(path, metadata, tensors, write_options);
}

Status write_model_gguf(const std::string& path, const LlamaModel& model, const ModelSource& source, DType dtype) {
  auto tensors = model_tensors(model);
  if (!tensors.ok()) return tensors.error().with_context(path + ": ");
  ModelWriteOptions options;
  options.dtype = dtype;
  return write_model_gguf(path, *tensors, source, options);
}

Status write_model_hf_weights(const std::string& path, const TensorsToWrite& model, const ModelWriteOptions& options) {
  NMKIT_TRY(file_type_of(options.dtype, path));
  std::vector<OutputTensor> tensors;
  for (const auto& [name, shape] : model_source::expected_tensors(model.params)) {
    const auto hf = hf_tensor_name(name, model.params);
    if (!hf) return Error(path + ": tensor '" + name + "' has no Hugging Face " + model.params.arch + " name");
    tensors.push_back(output_tensor(path, model, name, hf->first, shape, true, options.dtype));
  }
  WriteOptions write_options;
  write_options.on_tensor = options.on_tensor;
  return write_safetensors(path, tensors, Metadata{{"format", "pt"}}, write_options);
}

}  // namespace nmkit
