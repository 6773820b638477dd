#include "nmkit/model_cli.h"

#include <string>

#include "nmkit/safetensors.h"

namespace nmkit::cli {

namespace {

// A safetensors file with GGUF tensor names and the llama.* keys in its metadata (the form the model
// tests write).
Result<OpenedModel> open_safetensors(const std::string& path) {
  auto file = SafetensorsFile::open(path);
  if (!file.ok()) return file.error();
  auto shared = std::make_shared<SafetensorsFile>(std::move(file.value()));
  const Metadata& meta = shared->metadata();
  auto get = [&](const std::string& key) -> Result<std::string> {
    auto it = meta.find(key);
    if (it == meta.end()) return Error(path + ": metadata key '" + key + "' missing");
    return it->second;
  };
  OpenedModel m;
  m.path = path;
  const std::pair<const char*, int64_t*> ints[] = {
      {"llama.vocab_size", &m.params.n_vocab},        {"llama.embedding_length", &m.params.n_embd},
      {"llama.block_count", &m.params.n_layer},       {"llama.attention.head_count", &m.params.n_head},
      {"llama.attention.head_count_kv", &m.params.n_head_kv}, {"llama.feed_forward_length", &m.params.n_ff},
      {"llama.context_length", &m.params.n_ctx_train}};
  try {
    for (const auto& [key, dst] : ints) {
      auto v = get(key);
      if (!v.ok()) return v.error();
      *dst = std::stoll(*v);
    }
    auto eps = get("llama.attention.layer_norm_rms_epsilon");
    if (!eps.ok()) return eps.error();
    m.params.rms_eps = std::stof(*eps);
    auto base = get("llama.rope.freq_base");
    if (base.ok()) m.params.rope_base = std::stof(*base);
  } catch (const std::exception&) {
    return Error(path + ": a llama.* metadata value is not a number");
  }
  m.params.tied_output = shared->find("output.weight") == nullptr;
  const SafetensorsFile* f = shared.get();
  m.load = [f](const std::string& name) -> Result<Tensor> {
    auto view = f->view(name);
    if (!view.ok()) return view.error();
    if (!is_prunable(view->dtype)) return Error(f->path() + ": tensor '" + name + "' is not f32/bf16/f16");
    std::vector<float> values = to_f32(*view);
    return Tensor::from_f32(values, view->shape);
  };
  m.keep_alive = shared;
  return m;
}

}  // namespace

Result<OpenedModel> open_model(const std::string& path) {
  return open_safetensors(path);
}

void add_weight_flags(CLI::App& app, WeightFlags& flags) {
  app.add_option("--weights", flags.weights, "Linear weights: f32, bf16 or int8 (per channel, int8 activations)")
      ->capture_default_str();
  app.add_option("--pattern", flags.pattern, "Prune the attention and MLP linears on load to this N:M pattern");
  app.add_option("--method", flags.method, "Pruning method on load (magnitude)")->capture_default_str();
  app.add_option("--format", flags.format, "Pruned weights as dense (masked), sparse24, nm or slid")
      ->capture_default_str();
}

Result<ModelOptions> model_options(const WeightFlags& flags) {
  ModelOptions o;
  auto weights = parse_weight_dtype(flags.weights);
  if (!weights.ok()) return Error("--" + weights.error().message());
  o.weights = *weights;
  auto format = parse_linear_format(flags.format);
  if (!format.ok()) return Error("--" + format.error().message());
  o.format = *format;
  if (!flags.pattern.empty()) {
    auto pattern = Pattern::parse(flags.pattern);
    if (!pattern.ok()) return Error("--pattern: " + pattern.error().message());
    o.pattern = *pattern;
  } else if (o.format != LinearFormat::Dense) {
    return Error("--format " + flags.format + " needs --pattern");
  }
  auto method = parse_prune_method(flags.method);
  if (!method.ok()) return Error("--method: " + method.error().message());
  o.method = *method;
  if (o.format == LinearFormat::Slid) o.weights = DType::I8;  // slid runs int8 (SparseLinear::slid)
  return o;
}

std::string describe(const ModelOptions& o) {
  std::string s = o.weights == DType::F32 ? "f32" : o.weights == DType::BF16 ? "bf16" : "int8";
  if (o.pattern) s += " " + o.pattern->str();
  s += " " + std::string(linear_format_name(o.format));
  return s;
}

}  // namespace nmkit::cli
