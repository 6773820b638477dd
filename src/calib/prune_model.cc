// Pruning a model file end to end (include/nmkit/prune_model.h).
#include "nmkit/prune_model.h"

#include <optional>

#include "nmkit/model_write.h"
#include "nmkit/text_file.h"

namespace nmkit {
Result<CalibRun> calibrate_model(LlamaModel& model, const Tokenizer* tokenizer, const CalibTextOptions& o) {
  CalibRun run;
  CalibOptions options;
  options.pattern = o.pattern;
  options.method = o.method;
  options.format = o.format;
  options.refit_steps = o.refit_steps;
  options.on_block = o.on_block;
  options.selected = o.selected;
  std::vector<int32_t> tokens;
  int64_t n_seq = 0;
  if (needs_calibration(o.method) || o.refit_steps > 0) {
    if (o.n_seq < 1 || o.seq_len < 1) {
      return Error(ErrorCode::InvalidArgument, "calibration sequences and their length must be >= 1, got " +
                                                   std::to_string(o.n_seq) + " and " + std::to_string(o.seq_len));
    }
    if (o.seq_len > model.params().n_ctx_train && model.params().n_ctx_train > 0) {
      return Error(ErrorCode::InvalidArgument, "calibration length " + std::to_string(o.seq_len) +
                                                   " exceeds the model's context length " +
                                                   std::to_string(model.params().n_ctx_train));
    }
    if (tokenizer == nullptr) return Error(ErrorCode::InvalidArgument, "calibration needs the model's tokenizer");
    if (o.text_path.empty()) {
      return Error(ErrorCode::InvalidArgument,
                   std::string(calib_method_name(o.method)) + " needs a calibration text");
    }
    auto text = TextFile::open("calibration text", o.text_path);
    if (!text.ok()) return text.error();
    run.text_path = o.text_path;
    auto ids = tokenize_text(*text, *tokenizer, 0);  // the windows spread over the whole text
    if (!ids.ok()) return ids.error();
    run.text_tokens = static_cast<int64_t>(ids->ids.size());
    auto seqs = calibration_sequences(ids->ids, o.n_seq, o.seq_len, o.text_path);
    if (!seqs.ok()) return seqs.error();
    tokens = std::move(*seqs);
    n_seq = static_cast<int64_t>(tokens.size()) / o.seq_len;
  }
  auto report = calibrate_and_prune(model, tokens, n_seq, o.seq_len, options);
  if (!report.ok()) return report.error();
  run.report = std::move(*report);
  return run;
}

Status check_pruned_model_output(const std::string& input, const std::string& output, DType dtype,
                                 const std::vector<FileRole>& other_inputs, const std::vector<FileRole>& other_outputs,
                                 const std::string& label) {
  auto source = ModelSource::open(input);
  if (!source.ok()) return source.error();
  auto out = parse_model_output(output, dtype, *source, label);
  if (!out.ok()) return out.error();
  return check_model_output(*out, *source, other_inputs, other_outputs);
}

Result<PrunedModel> prune_model(const std::string& input, const CalibTextOptions& options) {
  auto source = ModelSource::open(input);
  if (!source.ok()) return source.error();
  std::optional<Tokenizer> tokenizer;
  if (needs_calibration(options.method) || options.refit_steps > 0) {
    auto tok = load_tokenizer(*source);
    if (!tok.ok()) return tok.error();
    tokenizer.emplace(std::move(*tok));
  }
  ModelOptions model_options;
  model_options.keep_dense_weights = true;
  auto model = LlamaModel::build(source->params(), source->tensors(), model_options);
  if (!model.ok()) return model.error().with_context(input + ": ");
  auto run = calibrate_model(*model, tokenizer ? &*tokenizer : nullptr, options);
  if (!run.ok()) return run.error();
  return PrunedModel{std::move(*source), std::move(*model), std::move(*run)};
}

Status write_pruned_model(const PrunedModel& pruned, const std::string& output, DType dtype,
                          const std::function<void(size_t, size_t, const std::string&)>& on_tensor) {
  auto out = parse_model_output(output, dtype, pruned.source);
  if (!out.ok()) return out.error();
  auto tensors = model_tensors(pruned.model);
  if (!tensors.ok()) return tensors.error();
  std::function<void(size_t, size_t, const OutputTensor&)> progress;
  if (on_tensor) progress = [&on_tensor](size_t i, size_t n, const OutputTensor& t) { on_tensor(i, n, t.name); };
  return write_model_output(*out, *tensors, pruned.source, progress);
}

}  // namespace nmkit
