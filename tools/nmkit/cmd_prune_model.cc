// nmkit prune MODEL -o OUT --pattern P --method magnitude|wanda|sparsegpt [--calib FILE]: prunes every
// attention and MLP linear of a llama model (docs/design.md 11.5), calibrated block by block for
// wanda and sparsegpt (docs/design.md section 12), and writes, by the form of OUT:
//   OUT.gguf         GGUF (a GGUF source: its metadata and tensor order), F32/F16/BF16 dense-masked;
//   OUT (a folder)   a Hugging Face llama folder that nmkit loads (transformers' layout): config.json,
//                    model.safetensors under HF names with q/k rows in HF order, tokenizer files
//                    (write_model_hf; any source);
//   OUT.safetensors  a Hugging Face source only: the weights under its own names and row order, to
//                    drop into its folder (a GGUF source is told to give a folder).
#include <fmt/core.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "tools/nmkit/cli_util.h"
#include "nmkit/files.h"
#include "nmkit/gguf.h"
#include "nmkit/model_write.h"
#include "tools/nmkit/prune_model.h"
#include "nmkit/safetensors.h"

namespace nmkit::cli {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool source_is_hf_folder(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

// -o names a Hugging Face folder unless it ends in .gguf or .safetensors (DIR/, DIR, an existing folder).
bool is_folder_output(const std::string& output) {
  return !ends_with(output, ".gguf") && !ends_with(output, ".safetensors");
}

Result<DType> parse_output_dtype(const std::string& text) {
  if (text == "f32") return DType::F32;
  if (text == "f16") return DType::F16;
  if (text == "bf16") return DType::BF16;
  return Error("--dtype: unknown dtype '" + text + "' (expected f32, f16 or bf16)");
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

Status write_model(const ModelSource& src, const std::string& output, const LlamaModel& model, DType dtype) {
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
    if (source == nullptr && ends_with(output, ".safetensors")) {
      // A file that drops into the source folder: its own names and q/k row order (docs/design.md 11.1).
      if (name == "rope_freqs.weight") continue;  // config.json's rope_scaling holds it
      auto hf = hf_tensor_from_gguf(NamedTensor{name, Tensor::copy_of(by_name.at(name)->view())}, model.params());
      if (!hf) return Error("-o " + output + ": tensor '" + name + "' has no Hugging Face " + model.params().arch + " name");
      tensors.push_back(converted(hf->name, std::make_shared<Tensor>(std::move(hf->tensor)), dtype));
    } else {
      tensors.push_back(converted(name, by_name.at(name), dtype));
    }
  }
  Progress progress("writing");
  if (is_folder_output(output)) {
    std::function<void(size_t, size_t, const OutputTensor&)> on_tensor;
    if (progress.enabled()) on_tensor = [&](size_t i, size_t n, const OutputTensor& t) { progress.update(i, n, t.name); };
    return write_model_hf(output, model, src, dtype, on_tensor);
  }
  if (ends_with(output, ".gguf")) {
    if (!source) {
      return Error("-o " + output + ": GGUF output needs a GGUF input (its metadata and tokenizer); write .safetensors");
    }
    std::vector<GgufKeyValue> metadata = source->metadata();
    for (GgufKeyValue& kv : metadata) {
      if (kv.key == "general.file_type") kv.value = GgufValue::of_uint32(file_type_of(dtype));
    }
    GgufWriteOptions options;
    options.alignment = source->alignment();
    if (progress.enabled()) {
      options.on_tensor = [&](size_t i, size_t n, const OutputTensor& t) { progress.update(i, n, t.name); };
    }
    return write_gguf(output, metadata, tensors, options);
  }
  if (source == nullptr) {  // Hugging Face layout: config.json and the tokenizer stay in the source folder
    WriteOptions options;
    if (progress.enabled()) {
      options.on_tensor = [&](size_t i, size_t n, const OutputTensor& t) { progress.update(i, n, t.name); };
    }
    return write_safetensors(output, tensors, Metadata{{"format", "pt"}}, options);
  }
  // A GGUF source as a lone safetensors file would need config.json and a tokenizer nobody has.
  return Error("-o " + output + ": a GGUF model is written as safetensors inside a Hugging Face folder "
               "(config.json, model.safetensors, tokenizer.json): give a folder, -o DIR/");
}

}  // namespace

void add_model_prune_flags(CLI::App& app, ModelPruneFlags& flags) {
  add_calib_flags(app, flags.calib);
  app.add_option("--dtype", flags.dtype, "Model input: tensor dtype written (f32, f16, bf16)")->capture_default_str();
}

bool is_model_source(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

int run_prune_model(const std::string& input, const std::string& output, const std::string& pattern_text,
                    const std::string& method_text, const std::string& format, const std::string& report_path,
                    const ModelPruneFlags& flags) {
  auto pattern = Pattern::parse(pattern_text);
  if (!pattern.ok()) return report_error(pattern.error().with_context("--pattern: "));
  auto method = parse_calib_method(method_text);
  if (!method.ok()) return report_error(method.error().with_context("--method: "));
  auto dtype = parse_output_dtype(flags.dtype);
  if (!dtype.ok()) return report_error(dtype.error());
  if (format != "dense") {
    return report_error("--format " + format + ": a model is written dense-masked (--format dense); pick the "
                        "runtime form with nmkit eval/generate --format");
  }
  if (!source_is_hf_folder(input) && ends_with(output, ".safetensors")) {  // before the long work
    return report_error("-o " + output + ": a GGUF model is written as safetensors inside a Hugging Face folder "
                        "(config.json, model.safetensors, tokenizer.json): give a folder, -o DIR/");
  }
  std::vector<FileRole> outputs{{"-o", output}};
  if (!report_path.empty()) outputs.push_back({"--report", report_path});
  std::vector<FileRole> inputs{{"input", input}};
  if (!flags.calib.calib.empty()) inputs.push_back({"--calib", flags.calib.calib});
  if (auto distinct = check_distinct_files(outputs, inputs); !distinct.ok()) return report_error(distinct.error());
  if (is_folder_output(output)) {  // a folder nmkit may not replace fails before the long work
    if (Status st = check_hf_output_folder(output); !st.ok()) return report_error(st.error().with_context("-o "));
  }
  if (!report_path.empty()) {  // an unwritable report folder fails before the long work
    auto probe = PendingFile::create(report_path);
    if (!probe.ok()) return report_error(probe.error());
  }

  auto source = ModelSource::open(input);
  if (!source.ok()) return report_error(source.error());
  std::optional<Tokenizer> tokenizer;
  if (needs_calibration(*method) || flags.calib.refit > 0) {
    auto tok = source_tokenizer(*source);
    if (!tok.ok()) return report_error(tok.error());
    tokenizer.emplace(std::move(*tok));
  }
  ModelOptions options;
  options.keep_dense_weights = true;
  auto model = LlamaModel::build(source->params(), source->tensors(), options);
  if (!model.ok()) return report_error(model.error());
  auto run = calibrate_model(*model, tokenizer ? &*tokenizer : nullptr, *pattern, *method, flags.calib,
                             CalibLinearFormat::Dense);
  if (!run.ok()) return report_error(run.error());
  // The report is made complete before the model is renamed into place (issue 13, M1).
  std::optional<PendingFile> report;
  if (!report_path.empty()) {
    auto file = prepare_text_file(report_path, calib_report_json(*run, *pattern, *method).dump(2) + "\n");
    if (!file.ok()) return report_error(file.error());
    report.emplace(std::move(*file));
  }
  if (Status st = write_model(*source, output, *model, *dtype); !st.ok()) return report_error(st.error());
  if (report) {
    if (Status st = report->commit(); !st.ok()) {
      return report_error(fmt::format("wrote {}, but not the report: {}", output, st.error().message()));
    }
  }

  PruneSums total;
  double err_sum = 0;
  int64_t err_count = 0;
  for (const LinearReport& l : run->report.linears) {
    total += l.sums;
    if (l.output_error) {
      err_sum += *l.output_error;
      ++err_count;
    }
  }
  const PruneMetrics m = metrics_from(total);
  fmt::print("{}\n", calib_summary(*run, *pattern, *method));
  fmt::print("pruned {} linears of {} blocks to {}: sparsity {:.2f}%, relative error {:.4f}", run->report.linears.size(),
             model->params().n_layer, pattern->str(), m.sparsity_percent, m.relative_error);
  if (err_count > 0) fmt::print(", mean output error {:.4f}", err_sum / static_cast<double>(err_count));
  fmt::print("\nwrote {} ({})\n", output, flags.dtype);
  if (report) fmt::print("report: {}\n", report_path);
  return 0;
}

}  // namespace nmkit::cli
