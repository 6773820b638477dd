#include "tools/nmkit/model_cli.h"

#include <string>

#include <fmt/format.h>

#include "nmkit/model_source.h"
#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/memory.h"

namespace nmkit::cli {


Result<OpenedModel> open_model(const std::string& path) {
  auto source = ModelSource::open(path);
  if (!source.ok()) return source.error();
  auto shared = std::make_shared<ModelSource>(std::move(source.value()));
  OpenedModel m;
  m.path = path;
  m.params = shared->params();
  m.tensors = shared->tensors();
  auto tokenizer = load_tokenizer(*shared);
  if (tokenizer.ok()) m.tokenizer = std::make_shared<const Tokenizer>(std::move(tokenizer.value()));
  else m.tokenizer_error = tokenizer.error().message();
  m.keep_alive = shared;
  return m;
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

std::string describe(const ModelOptions& o) { return weight_form_name(o); }

Result<LlamaModel> build_model(const OpenedModel& source, ModelOptions& asked, int64_t n_ctx) {
  auto resolved = model_options_for(source.tensors, asked);
  if (!resolved.ok()) return resolved.error().with_context(source.path + ": ");
  asked = *resolved;
  ModelOptions options = asked;
  const uint64_t needed = model_bytes_at_least(source.params, options, n_ctx);
  NMKIT_TRY(check_memory(source.path, needed,
                         fmt::format("{} weights{}", describe(options),
                                     n_ctx > 0 ? fmt::format(" and a KV cache of {} tokens", n_ctx) : "")));
  MemoryActivity activity("building " + source.path + " (" + describe(options) + ")");
  Progress progress("building " + describe(options));
  options.on_block = [&progress](int64_t b, int64_t n) {
    progress.update(static_cast<size_t>(b + 1), static_cast<size_t>(n), "");
  };
  auto model = LlamaModel::build(source.params, source.tensors, options);
  if (!model.ok()) return model.error().with_context(source.path + ": ");
  return model;
}

Result<std::shared_ptr<const Tokenizer>> require_tokenizer(const OpenedModel& source) {
  if (!source.tokenizer) return Error(source.tokenizer_error);
  return source.tokenizer;
}

Result<DType> parse_output_dtype(const std::string& text) {
  if (text == "f32") return DType::F32;
  if (text == "f16") return DType::F16;
  if (text == "bf16") return DType::BF16;
  return Error("--dtype: unknown dtype '" + text + "' (expected f32, f16 or bf16)");
}

}  // namespace nmkit::cli
