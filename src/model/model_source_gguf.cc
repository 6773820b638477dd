// ModelSource from a GGUF file: hyper-parameters from the `ARCH.*` keys (llama.cpp's names; those of
// one family only, in its file: family_*.cc), and every tensor checked against them (docs/design.md
// sections 11.1, 11.2 and 11.8).
#include <cmath>
#include <limits>
#include <string>
#include <unordered_set>

#include "model/family.h"
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

// Whether a tensor of a packed model file is one of its layers' records (docs/design.md 11.9).
bool is_record_tensor(std::string_view name) { return name.find(".nmkit.") != std::string_view::npos; }

// A packed model file's form, from its nmkit.packed.* keys.
Result<PackedForm> read_packed_form(const GgufFile& file) {
  const std::string& path = file.path();
  auto version = file.get_uint("nmkit.packed.version");
  if (!version.ok()) return version.error();
  if (*version != 1) {
    return Error(path + ": metadata key 'nmkit.packed.version' is " + std::to_string(*version) +
                 ": this nmkit reads packed model files of version 1 (pack the model again)");
  }
  PackedForm form;
  auto weights = file.get_string("nmkit.packed.weights");
  if (!weights.ok()) return weights.error();
  auto dtype = parse_weight_dtype(*weights);
  if (!dtype.ok()) return dtype.error().with_context(path + ": nmkit.packed.weights: ");
  form.weights = *dtype;
  auto format = file.get_string("nmkit.packed.format");
  if (!format.ok()) return format.error();
  auto linear = parse_linear_format(*format);
  if (!linear.ok()) return linear.error().with_context(path + ": nmkit.packed.format: ");
  form.format = *linear;
  if (file.find_key("nmkit.packed.pattern") != nullptr) {
    auto text = file.get_string("nmkit.packed.pattern");
    if (!text.ok()) return text.error();
    auto pattern = Pattern::parse(*text);
    if (!pattern.ok()) return pattern.error().with_context(path + ": nmkit.packed.pattern: ");
    form.pattern = *pattern;
  }
  auto head = file.get_string("nmkit.packed.head");
  if (!head.ok()) return head.error();
  if (*head != "embedding" && *head != "records") {
    return Error(path + ": metadata key 'nmkit.packed.head' is '" + *head + "', not 'embedding' or 'records'");
  }
  form.head_reads_embedding = *head == "embedding";
  return form;
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
  const model::Family* family = model::find_gguf_family(*arch);
  if (family == nullptr) return Error(path + ": " + unsupported_architecture(*arch));
  impl.architecture = *arch;
  const std::string k = *arch + ".";

  LlamaParams& p = impl.params;
  p.arch = family->name;
  const std::pair<std::string, int64_t*> counts[] = {
      {k + "embedding_length", &p.n_embd},      {k + "block_count", &p.n_layer},
      {k + "attention.head_count", &p.n_head},  {k + "feed_forward_length", &p.n_ff},
      {k + "context_length", &p.n_ctx_train}};
  for (const auto& [key, dst] : counts) {
    auto v = get_count(file, key);
    if (!v.ok()) return v.error();
    *dst = *v;
  }
  // Optional counts: llama.cpp's defaults (n_head_kv = n_head, head size n_embd / n_head).
  p.n_head_kv = p.n_head;
  const std::pair<std::string, int64_t*> optional_counts[] = {
      {k + "attention.head_count_kv", &p.n_head_kv}, {k + "attention.key_length", &p.n_embd_head}};
  for (const auto& [key, dst] : optional_counts) {
    if (file.find_key(key) == nullptr) continue;
    auto v = get_count(file, key);
    if (!v.ok()) return v.error();
    *dst = *v;
  }
  if (p.n_embd_head > 0 && p.n_embd_head * p.n_head == p.n_embd) p.n_embd_head = 0;  // the default, stated
  auto eps = get_positive_float(file, k + "attention.layer_norm_rms_epsilon");
  if (!eps.ok()) return eps.error();
  p.rms_eps = *eps;
  if (file.find_key(k + "rope.freq_base") != nullptr) {  // llama.cpp's default when absent: 10000
    auto base = get_positive_float(file, k + "rope.freq_base");
    if (!base.ok()) return base.error();
    p.rope_base = *base;
  }
  // The vocabulary: ARCH.vocab_size, else the token list, else the embedding's rows.
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
  if (file.find_key("nmkit.packed.version") != nullptr) {  // a packed model file: no weights, records
    auto form = read_packed_form(file);
    if (!form.ok()) return form.error();
    impl.packed = *form;
    const GgufValue* tied = file.find_key("nmkit.packed.tied_output");
    if (tied == nullptr || tied->type != GgufType::Bool) {
      return Error(path + ": metadata key 'nmkit.packed.tied_output' is " + (tied == nullptr ? "missing" : "not a bool") +
                   " (a packed model file says whether its head is the embedding)");
    }
    p.tied_output = tied->integer == 1;
  }
  if (family->read_gguf) NMKIT_TRY(family->read_gguf(file, p));

  // What nmkit's forward pass does not implement is refused rather than run wrongly.
  const int64_t hd = p.head_dim();
  for (const char* key : {"rope.dimension_count", "attention.value_length"}) {
    auto dims = model::optional_uint(file, k + key);
    if (!dims.ok()) return dims.error();
    if (*dims && **dims != static_cast<uint64_t>(hd)) {
      return Error(path + ": metadata key '" + k + key + "' is " + std::to_string(**dims) +
                   ", but nmkit runs rope and values over the whole head (head size " + std::to_string(hd) + ")");
    }
  }
  if (file.find_key(k + "rope.scaling.type") != nullptr) {
    auto type = file.get_string(k + "rope.scaling.type");
    if (!type.ok()) return type.error();
    if (*type == "linear") {
      auto factor = file.get_float(k + "rope.scaling.factor");
      if (!factor.ok()) return factor.error();
      if (!(*factor > 0)) {
        return Error(path + ": metadata key '" + k + "rope.scaling.factor' is " + std::to_string(*factor) + ", not positive");
      }
      p.rope_scale = static_cast<float>(1.0 / *factor);
    } else if (*type != "none") {
      return Error(path + ": metadata key '" + k + "rope.scaling.type' is '" + *type +
                   "': rope scaling other than linear and llama3 (rope_freqs.weight) is not supported");
    }
  }
  if (const GgufTensorInfo* freqs = file.find("rope_freqs.weight")) {  // llama3 rope scaling (convert_hf_to_gguf.py)
    if (freqs->shape() != Shape{hd / 2}) {
      return Error(path + ": tensor 'rope_freqs.weight' has shape " + shape_str(freqs->shape()) + ", head size " +
                   std::to_string(hd) + " needs [" + std::to_string(hd / 2) + "]");
    }
    auto factors = file.dequantize(*freqs);
    if (!factors.ok()) return factors.error();
    p.rope_factors.assign(factors->as<float>(), factors->as<float>() + hd / 2);
  }
  if (Status valid = p.validate(); !valid.ok()) return valid.error().with_context(path + ": ");

  std::unordered_set<std::string> expected;
  for (const auto& [name, shape] : expected_tensors(p)) {
    // A packed file holds its linears (and a head not read from the embedding) as records.
    if (impl.packed && (shape.size() == 2 && name != "token_embd.weight")) continue;
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
    if (impl.packed && is_record_tensor(info.name) && (info.type == GgmlType::I8 || info.type == GgmlType::I32)) {
      impl.names.push_back(info.name);  // checked by the build, which knows each layer's records
      continue;
    }
    if (expected.count(info.name) == 0 && !(info.name == "rope_freqs.weight" && !p.rope_factors.empty())) {
      return Error(path + ": tensor '" + info.name + "' is not part of a " + *arch + " model nmkit runs (" + k +
                   "block_count = " + std::to_string(p.n_layer) + ")");
    }
  }
  return ok_status();
}

}  // namespace nmkit::model_source
