// ModelSource from a GGUF file: hyper-parameters from the `llama.*` keys (llama.cpp's names), and
// every tensor checked against them (docs/design.md sections 11.1 and 11.2).
#include <cmath>
#include <limits>
#include <string>
#include <unordered_set>

#include "model/model_source_impl.h"

namespace nmkit::model_source {
namespace {

Result<int64_t> get_count(const GgufFile& file, const std::string& key) {
  auto value = file.get_uint(key);
  if (!value.ok()) return value.error();
  if (*value > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return Error(file.path() + ": metadata key '" + key + "' is " + std::to_string(*value) + ", too large");
  }
  return static_cast<int64_t>(*value);
}

// A float hyper-parameter: positive and finite, else an Error naming the key and value (an infinite
// epsilon or rope base runs, and computes nothing useful).
Result<float> get_positive_float(const GgufFile& file, const std::string& key) {
  auto value = file.get_float(key);
  if (!value.ok()) return value.error();
  const auto f = static_cast<float>(*value);
  if (!(f > 0.0f) || !std::isfinite(f)) {
    return Error(file.path() + ": metadata key '" + key + "' is " + std::to_string(*value) +
                 ", not a positive finite number");
  }
  return f;
}

}  // namespace

Status open_gguf(ModelSource::Impl& impl) {
  auto opened = GgufFile::open(impl.path);
  if (!opened.ok()) return opened.error();
  impl.gguf.emplace(std::move(*opened));
  impl.files = {impl.path};
  const GgufFile& file = *impl.gguf;
  const std::string& path = impl.path;

  auto arch = file.get_string("general.architecture");
  if (!arch.ok()) return arch.error();
  bool supported = false;
  for (const std::string& a : ModelSource::supported_architectures()) supported |= a == *arch;
  if (!supported) return Error(path + ": " + unsupported_architecture(*arch));
  impl.architecture = *arch;
  const std::string k = *arch + ".";

  LlamaParams& p = impl.params;
  const std::pair<std::string, int64_t*> counts[] = {
      {k + "embedding_length", &p.n_embd},      {k + "block_count", &p.n_layer},
      {k + "attention.head_count", &p.n_head},  {k + "feed_forward_length", &p.n_ff},
      {k + "context_length", &p.n_ctx_train}};
  for (const auto& [key, dst] : counts) {
    auto v = get_count(file, key);
    if (!v.ok()) return v.error();
    *dst = *v;
  }
  p.n_head_kv = p.n_head;
  if (file.find_key(k + "attention.head_count_kv") != nullptr) {
    auto v = get_count(file, k + "attention.head_count_kv");
    if (!v.ok()) return v.error();
    p.n_head_kv = *v;
  }
  auto eps = get_positive_float(file, k + "attention.layer_norm_rms_epsilon");
  if (!eps.ok()) return eps.error();
  p.rms_eps = *eps;
  if (file.find_key(k + "rope.freq_base") != nullptr) {  // llama.cpp's default when absent: 10000
    auto base = get_positive_float(file, k + "rope.freq_base");
    if (!base.ok()) return base.error();
    p.rope_base = *base;
  }
  // The vocabulary: llama.vocab_size, else the token list, else the embedding's rows.
  const GgufTensorInfo* embd = file.find("token_embd.weight");
  if (file.find_key(k + "vocab_size") != nullptr) {
    auto v = get_count(file, k + "vocab_size");
    if (!v.ok()) return v.error();
    p.n_vocab = *v;
  } else if (const GgufValue* tokens = file.find_key("tokenizer.ggml.tokens");
             tokens != nullptr && tokens->type == GgufType::Array) {
    p.n_vocab = static_cast<int64_t>(tokens->elements.size());
  } else if (embd != nullptr && embd->ne.size() == 2) {
    p.n_vocab = embd->ne[1];
  }
  p.tied_output = file.find("output.weight") == nullptr;
  if (Status valid = p.validate(); !valid.ok()) return valid.error().with_context(path + ": ");

  // What nmkit's forward pass does not implement is refused rather than run wrongly.
  if (file.find_key(k + "rope.dimension_count") != nullptr) {
    auto dims = file.get_uint(k + "rope.dimension_count");
    if (!dims.ok()) return dims.error();
    if (*dims != static_cast<uint64_t>(p.head_dim())) {
      return Error(path + ": metadata key '" + k + "rope.dimension_count' is " + std::to_string(*dims) +
                   ", but rope over part of a head is not supported (head size " + std::to_string(p.head_dim()) + ")");
    }
  }
  if (file.find_key(k + "rope.scaling.type") != nullptr) {
    auto type = file.get_string(k + "rope.scaling.type");
    if (!type.ok()) return type.error();
    if (*type != "none") {
      return Error(path + ": metadata key '" + k + "rope.scaling.type' is '" + *type + "': rope scaling is not supported");
    }
  }

  std::unordered_set<std::string> expected;
  for (const auto& [name, shape] : expected_tensors(p)) {
    const GgufTensorInfo* info = file.find(name);
    if (info == nullptr) {
      return Error(path + ": tensor '" + name + "' is missing (" + k + "block_count = " + std::to_string(p.n_layer) + ")");
    }
    if (info->shape() != shape) {
      return Error(path + ": tensor '" + name + "' has shape " + shape_str(info->shape()) + ", the " + k +
                   "* metadata gives " + shape_str(shape));
    }
    if (!ggml_can_dequantize(info->type)) {
      return Error(path + ": tensor '" + name + "' has ggml type " + std::string(ggml_type_name(info->type)) +
                   ", which nmkit does not dequantize");
    }
    impl.names.push_back(name);
    expected.insert(name);
  }
  for (const GgufTensorInfo& info : file.tensors()) {
    if (expected.count(info.name) == 0) {
      return Error(path + ": tensor '" + info.name + "' is not part of a " + *arch + " model nmkit runs (" + k +
                   "block_count = " + std::to_string(p.n_layer) + ")");
    }
  }
  return ok_status();
}

}  // namespace nmkit::model_source
