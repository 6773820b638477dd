// nmkit prune MODEL -o OUT --pattern P --method magnitude|wanda|sparsegpt|admm [--calib FILE]: prunes
// the attention and MLP linears of a llama model (docs/design.md 11.5; those --include/--exclude
// select, by GGUF or Hugging Face name), calibrated block by block for wanda, sparsegpt and admm
// (docs/design.md 12, 12.1), and writes it (include/nmkit/prune_model.h: OUT.gguf, a Hugging Face
// folder DIR/, or, from a Hugging Face source, OUT.safetensors to drop into its folder).
#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "nmkit/files.h"
#include "nmkit/model_write.h"
#include "nmkit/prune_model.h"
#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/memory.h"
#include "tools/nmkit/model_cli.h"
#include "tools/nmkit/prune_model.h"

namespace nmkit::cli {

void add_model_prune_flags(CLI::App& app, ModelPruneFlags& flags) {
  add_calib_flags(app, flags.calib);
  app.add_option("--dtype", flags.dtype, "Model input: tensor dtype written (f32, f16, bf16)")->capture_default_str();
  app.add_option("--calib-weights", flags.pass_weights,
                 "Model input: weights the calibration passes run with (f32, bf16 or int8; default: bf16 "
                 "for wanda, else the file's where it stores them f32 or bf16, read in place, else f32); "
                 "the pruned weights come from the file's either way");
}

bool is_model_source(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

int run_prune_model(const ModelPruneArgs& a) {
  auto pattern = Pattern::parse(a.pattern);
  if (!pattern.ok()) return report_error(pattern.error().with_context("--pattern: "));
  auto method = parse_calib_method(a.method);
  if (!method.ok()) return report_error(method.error().with_context("--method: "));
  auto dtype = parse_output_dtype(a.flags.dtype);
  if (!dtype.ok()) return report_error(dtype.error());
  if (a.format != "dense") {
    return report_error("--format " + a.format + ": a model is written dense-masked (--format dense); pick the "
                        "runtime form with nmkit eval/generate --format");
  }
  auto filter = NameFilter::make(a.include, a.exclude);
  if (!filter.ok()) return report_error(filter.error());
  auto source = ModelSource::open(a.input);
  if (!source.ok()) return report_error(source.error());
  const LlamaParams& params = source->params();

  // --include/--exclude pick linears by either name: blk.0.attn_q.weight, model.layers.0.self_attn.q_proj.weight.
  std::set<std::string> chosen;
  size_t linears = 0;
  for (int64_t b = 0; b < params.n_layer; ++b) {
    for (const std::string& linear : LlamaModel::block_linear_names()) {
      const std::string name = "blk." + std::to_string(b) + "." + linear + ".weight";
      ++linears;
      if (filter->selected({name, hf_tensor_name(name, params)->first})) chosen.insert(name);
    }
  }
  if (chosen.empty()) {
    return report_error(fmt::format("--include '{}' --exclude '{}' select none of the model's {} linears (named like "
                                    "blk.0.attn_q.weight or model.layers.0.self_attn.q_proj.weight); nmkit convert "
                                    "writes a model without pruning", a.include, a.exclude, linears));
  }

  auto options = calib_text_options(*pattern, *method, a.flags.calib, CalibLinearFormat::Dense);
  if (!options.ok()) return report_error(options.error());
  if (chosen.size() < linears) {
    options->selected = [&chosen](std::string_view name) { return chosen.count(std::string(name)) > 0; };
  }
  // Every output is checked before the long work: none is a file the model reads, the --calib text
  // or another output; each location takes a temporary; the model's fits its file system.
  std::vector<FileRole> inputs;
  if (!options->text_path.empty()) inputs.push_back({"--calib", options->text_path});
  std::vector<FileRole> other_outputs;
  if (!a.report.empty()) other_outputs.push_back({"--report", a.report});
  auto output = parse_model_output(a.output, *dtype, *source, "-o");
  if (!output.ok()) return report_error(output.error());
  if (Status st = check_model_output(*output, *source, inputs, other_outputs); !st.ok()) return report_error(st.error());
  if (!a.report.empty()) {  // an unwritable report folder fails before the long work
    auto probe = PendingFile::create(a.report);
    if (!probe.ok()) return report_error(probe.error());
  }

  // Pruned as it is written (prune_model_to): the progress line counts blocks; the report is made
  // complete before the model is renamed into place (issue 13, M1).
  // docs/design.md 12: the passes' weights (unset: the file's, read in place), and the output errors
  // (a product with H per linear; for Wanda a Hessian as well) only for the report.
  if (!a.flags.pass_weights.empty()) {
    auto pass = parse_weight_dtype(a.flags.pass_weights);
    if (!pass.ok()) return report_error(pass.error().with_context("--calib-weights: "));
    options->pass_weights = *pass;
  }
  options->output_error = !a.report.empty();
  Progress calib_progress(std::string(calib_method_name(*method)) + " " + pattern->str());
  show_calib_progress(calib_progress, *options);
  std::optional<PendingFile> report;
  const auto prepare_report = [&](const CalibRun& done) -> Status {
    if (a.report.empty()) return ok_status();
    auto file = prepare_text_file(a.report, calib_report_json(done, *pattern, *method).dump(2) + "\n");
    if (!file.ok()) return file.error();
    report.emplace(std::move(*file));
    return ok_status();
  };
  Result<CalibRun> pruned = Error("");
  {
    MemoryActivity activity("pruning " + a.input +
                            (options->text_path.empty() ? "" : " on the calibration text " + options->text_path));
    pruned = prune_model_to(a.input, a.output, *options, *dtype, {}, prepare_report);
  }
  calib_progress.clear();
  if (!pruned.ok()) return report_error(pruned.error());
  const CalibRun& run = *pruned;
  if (report) {
    if (Status st = report->commit(); !st.ok()) {
      return report_error(fmt::format("wrote {}, but not the report: {}", a.output, st.error().message()));
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
             params.n_layer, pattern->str(), m.sparsity_percent, m.relative_error);
  if (err_count > 0) fmt::print(", mean output error {:.4f}", err_sum / static_cast<double>(err_count));
  if (chosen.size() < linears) fmt::print("; {} left dense by --include/--exclude", linears - chosen.size());
  fmt::print("\nwrote {} ({})\n", a.output, a.flags.dtype);
  if (report) fmt::print("report: {}\n", a.report);
  return 0;
}

}  // namespace nmkit::cli
