// nmkit prune MODEL -o OUT --pattern P --method magnitude|wanda|sparsegpt|admm [--calib FILE]: prunes every
// attention and MLP linear of a llama model (docs/design.md 11.5), calibrated block by block for
// wanda, sparsegpt and admm (docs/design.md 12, 12.1), and writes, by the form of OUT:
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
#include "tools/nmkit/prune_model.h"
#include "nmkit/prune_model.h"

namespace nmkit::cli {
namespace {

Result<DType> parse_output_dtype(const std::string& text) {
  if (text == "f32") return DType::F32;
  if (text == "f16") return DType::F16;
  if (text == "bf16") return DType::BF16;
  return Error("--dtype: unknown dtype '" + text + "' (expected f32, f16 or bf16)");
}

}  // namespace

void add_model_prune_flags(CLI::App& app, ModelPruneFlags& flags) {
  add_calib_flags(app, flags.calib);
  app.add_option("--dtype", flags.dtype, "Model input: tensor dtype written (f32, f16, bf16)")->capture_default_str();
  app.add_option("--calib-weights", flags.pass_weights,
                 "Model input: weights the calibration passes run with (f32, bf16 or int8); the pruned "
                 "weights come from the file's either way")
      ->capture_default_str();
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
  std::vector<FileRole> outputs{{"-o", output}};
  if (!report_path.empty()) outputs.push_back({"--report", report_path});
  std::vector<FileRole> inputs{{"input", input}};
  if (!flags.calib.calib.empty()) inputs.push_back({"--calib", flags.calib.calib});
  if (auto distinct = check_distinct_files(outputs, inputs); !distinct.ok()) return report_error(distinct.error());
  // A form nmkit cannot write, or a folder it may not replace, fails before the long work.
  if (Status st = check_pruned_model_output(input, output); !st.ok()) {
    return report_error(st.error().with_context("-o "));
  }
  if (!report_path.empty()) {  // an unwritable report folder fails before the long work
    auto probe = PendingFile::create(report_path);
    if (!probe.ok()) return report_error(probe.error());
  }

  auto options = calib_text_options(*pattern, *method, flags.calib, CalibLinearFormat::Dense);
  if (!options.ok()) return report_error(options.error());
  // docs/design.md 12: the passes' weights, and the output errors (a product with H per linear; for
  // Wanda a Hessian as well) only for the report.
  auto pass = parse_weight_dtype(flags.pass_weights);
  if (!pass.ok()) return report_error(pass.error().with_context("--calib-weights: "));
  options->pass_weights = *pass;
  options->output_error = !report_path.empty();
  Progress calib_progress(std::string(calib_method_name(*method)) + " " + pattern->str());
  show_calib_progress(calib_progress, *options);
  auto pruned = prune_model(input, *options);
  calib_progress.clear();
  if (!pruned.ok()) return report_error(pruned.error());
  const CalibRun& run = pruned->run;
  // The report is made complete before the model is renamed into place (issue 13, M1).
  std::optional<PendingFile> report;
  if (!report_path.empty()) {
    auto file = prepare_text_file(report_path, calib_report_json(run, *pattern, *method).dump(2) + "\n");
    if (!file.ok()) return report_error(file.error());
    report.emplace(std::move(*file));
  }
  Progress progress("writing");
  std::function<void(size_t, size_t, const std::string&)> on_tensor;
  if (progress.enabled()) on_tensor = [&](size_t i, size_t n, const std::string& name) { progress.update(i, n, name); };
  if (Status st = write_pruned_model(*pruned, output, *dtype, on_tensor); !st.ok()) return report_error(st.error());
  progress.clear();
  if (report) {
    if (Status st = report->commit(); !st.ok()) {
      return report_error(fmt::format("wrote {}, but not the report: {}", output, st.error().message()));
    }
  }

  PruneSums total;
  double err_sum = 0;
  int64_t err_count = 0;
  for (const LinearReport& l : run.report.linears) {
    total += l.sums;
    if (l.output_error) {
      err_sum += *l.output_error;
      ++err_count;
    }
  }
  const PruneMetrics m = metrics_from(total);
  fmt::print("{}\n", calib_summary(run, *pattern, *method));
  fmt::print("pruned {} linears of {} blocks to {}: sparsity {:.2f}%, relative error {:.4f}", run.report.linears.size(),
             pruned->model.params().n_layer, pattern->str(), m.sparsity_percent, m.relative_error);
  if (err_count > 0) fmt::print(", mean output error {:.4f}", err_sum / static_cast<double>(err_count));
  fmt::print("\nwrote {} ({})\n", output, flags.dtype);
  if (report) fmt::print("report: {}\n", report_path);
  return 0;
}

}  // namespace nmkit::cli
