// Pruning a model file end to end (include/nmkit/prune_model.h).
#include "nmkit/prune_model.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "nmkit/gguf.h"
#include "nmkit/model_write.h"
#include "nmkit/safetensors.h"

namespace nmkit {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_folder(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

// An output names a Hugging Face folder unless it ends in .gguf or .safetensors (DIR/, DIR, an
// existing folder).
bool is_folder_output(const std::string& output) {
  return !ends_with(output, ".gguf") && !ends_with(output, ".safetensors");
}

Error gguf_as_safetensors(const std::string& output) {
  return Error(ErrorCode::InvalidArgument,
               output + ": a GGUF model is written as safetensors inside a Hugging Face folder "
                        "(config.json, model.safetensors, tokenizer.json): give a folder, DIR/");
}

// llama.cpp's general.file_type (llama_ftype) of an all-F32/F16/BF16 file.
uint32_t file_type_of(DType dtype) { return dtype == DType::F32 ? 0 : dtype == DType::F16 ? 1 : 32; }

OutputTensor converted(const std::string& name, std::shared_ptr<Tensor> f32, DType dtype) {
  OutputTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = f32->shape();
  t.fill = [f32, dtype](std::byte* dst) -> Status {
    convert_from_f32(dtype, f32->as<float>(), dst, static_cast<size_t>(f32->numel()));
    return ok_status();
  };
  return t;
}

Result<std::string> read_utf8_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorCode::NotFound, "cannot read the calibration text").with_file(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (auto bad = first_invalid_utf8(text)) {
    return Error(ErrorCode::InvalidFile, "not UTF-8 text (invalid byte at offset " + std::to_string(*bad) + ")")
        .with_file(path);
  }
  return text;
}

}  // namespace

Result<CalibRun> calibrate_model(LlamaModel& model, const Tokenizer* tokenizer, const CalibTextOptions& o) {
  CalibRun run;
  CalibOptions options;
  options.pattern = o.pattern;
  options.method = o.method;
  options.format = o.format;
  options.refit_steps = o.refit_steps;
  options.admm = o.admm;
  options.wanda_error_tokens = o.wanda_error_tokens;
  options.output_error = o.output_error;
  options.on_block = o.on_block;
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
    auto text = read_utf8_text(o.text_path);
    if (!text.ok()) return text.error();
    run.text_path = o.text_path;
    auto ids = tokenizer->encode(*text, tokenizer->add_bos(), /*parse_special=*/false);
    if (!ids.ok()) return ids.error().with_context(o.text_path + ": ");
    run.text_tokens = static_cast<int64_t>(ids->size());
    auto seqs = calibration_sequences(*ids, o.n_seq, o.seq_len, o.text_path);
    if (!seqs.ok()) return seqs.error();
    tokens = std::move(*seqs);
    n_seq = static_cast<int64_t>(tokens.size()) / o.seq_len;
  }
  auto report = calibrate_and_prune(model, tokens, n_seq, o.seq_len, options);
  if (!report.ok()) return report.error();
  run.report = std::move(*report);
  return run;
}

Status check_pruned_model_output(const std::string& input, const std::string& output) {
  if (!is_folder(input) && ends_with(output, ".safetensors")) return gguf_as_safetensors(output);
  if (is_folder_output(output)) return check_hf_output_folder(output);
  return ok_status();
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
  model_options.weights = options.pass_weights;
  auto model = LlamaModel::build(source->params(), source->tensors(), model_options);
  if (!model.ok()) return model.error();
  auto run = calibrate_model(*model, tokenizer ? &*tokenizer : nullptr, options);
  if (!run.ok()) return run.error();
  return PrunedModel{std::move(*source), std::move(*model), std::move(*run)};
}

Status write_pruned_model(const PrunedModel& pruned, const std::string& output, DType dtype,
                          const std::function<void(size_t, size_t, const std::string&)>& on_tensor) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16) {
    return Error(ErrorCode::InvalidArgument,
                 "a model is written as F32, F16 or BF16, not " + std::string(dtype_name(dtype)));
  }
  const ModelSource& src = pruned.source;
  const LlamaModel& model = pruned.model;
  std::function<void(size_t, size_t, const OutputTensor&)> progress;
  if (on_tensor) progress = [&on_tensor](size_t i, size_t n, const OutputTensor& t) { on_tensor(i, n, t.name); };
  if (is_folder_output(output)) return write_model_hf(output, model, src, dtype, progress);
  auto named = model.tensors();
  if (!named.ok()) return named.error();
  std::map<std::string, std::shared_ptr<Tensor>> by_name;
  std::vector<std::string> order;
  for (NamedTensor& t : *named) {
    order.push_back(t.name);
    by_name[t.name] = std::make_shared<Tensor>(std::move(t.tensor));
  }
  const GgufFile* source = src.gguf();
  if (source != nullptr) {
    order.clear();
    for (const GgufTensorInfo& info : source->tensors()) {
      order.push_back(info.name);
      if (by_name.count(info.name) == 0) {  // a tensor the model does not use (rope_freqs, ...)
        auto t = source->dequantize(info);
        if (!t.ok()) return t.error();
        by_name[info.name] = std::make_shared<Tensor>(std::move(*t));
      }
    }
  }
  std::vector<OutputTensor> tensors;
  for (const std::string& name : order) {
    if (source == nullptr) {
      // A file that drops into the source folder: its own names and q/k row order (docs/design.md 11.1).
      const auto hf = hf_tensor_name(name, model.params());
      if (!hf) return Error(output + ": tensor '" + name + "' has no Hugging Face llama name");
      auto rows = hf->second > 0 ? std::make_shared<Tensor>(hf_rows_from_gguf(*by_name.at(name), hf->second))
                                 : by_name.at(name);
      tensors.push_back(converted(hf->first, rows, dtype));
    } else {
      tensors.push_back(converted(name, by_name.at(name), dtype));
    }
  }
  if (ends_with(output, ".gguf")) {
    if (source == nullptr) {
      return Error(ErrorCode::InvalidArgument,
                   output + ": GGUF output needs a GGUF input (its metadata and tokenizer); write .safetensors");
    }
    std::vector<GgufKeyValue> metadata = source->metadata();
    for (GgufKeyValue& kv : metadata) {
      if (kv.key == "general.file_type") kv.value = GgufValue::of_uint32(file_type_of(dtype));
    }
    GgufWriteOptions options;
    options.alignment = source->alignment();
    options.on_tensor = progress;
    return write_gguf(output, metadata, tensors, options);
  }
  if (source != nullptr) return gguf_as_safetensors(output);
  WriteOptions options;  // Hugging Face layout: config.json and the tokenizer stay in the source folder
  options.on_tensor = progress;
  return write_safetensors(output, tensors, Metadata{{"format", "pt"}}, options);
}

}  // namespace nmkit
