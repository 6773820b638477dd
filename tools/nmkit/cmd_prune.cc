// nmkit prune IN -o OUT --pattern 6:8 [--method ...] [--format ...] [--report R.json]: prunes every
// selected 2-D float tensor of a checkpoint, copies the rest, prints what the pruning cost.
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <fmt/core.h>

#include "nmkit/files.h"
#include "nmkit/prune_checkpoint.h"
#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "tools/nmkit/prune_report.h"
#include "tools/nmkit/prune_model.h"  // a GGUF file or Hugging Face folder: calibrated model pruning

namespace nmkit::cli {
namespace {

struct PruneArgs {
  std::string input;
  std::string output;
  std::string pattern;
  std::string method = "magnitude";
  std::string format = "dense";
  std::string grad;
  std::string act_norms;
  std::string include;
  std::string exclude = kDefaultExclude;
  std::string report;
  ModelPruneFlags model;
  bool pattern_given = false;  // --pattern on the command line (it may still be "")
};

// Parses the option strings and checks how they combine; the message quotes the option and the bad value.
Result<PruneCheckpointJob> make_job(const PruneArgs& args) {
  PruneCheckpointJob job;
  job.input = args.input;
  job.output = args.output;
  job.grad_path = args.grad;
  job.act_norms_path = args.act_norms;
  auto pattern = Pattern::parse(args.pattern);
  if (!pattern.ok()) return pattern.error().with_context("--pattern: ");
  job.pattern = *pattern;
  auto method = parse_prune_method(args.method);
  if (!method.ok()) return method.error().with_context("--method: ");
  job.method = *method;
  auto format = parse_stored_format(args.format);
  if (!format.ok()) return format.error().with_context("--format: ");
  job.format = format->format;
  job.layout = format->layout;
  if (auto status = check_format_pattern(job.format, job.pattern); !status.ok()) {
    return status.error().with_context("--format ");
  }
  const bool gradient = job.method == PruneMethod::Gradient;
  const bool wanda = job.method == PruneMethod::Wanda;
  if (gradient && args.grad.empty()) return Error("--method gradient: needs --grad G.safetensors");
  if (wanda && args.act_norms.empty()) return Error("--method wanda: needs --act-norms A.safetensors");
  if (!gradient && !args.grad.empty()) {
    return Error(fmt::format("--grad '{}': only used by --method gradient (method is {})", args.grad,
                             prune_method_name(job.method)));
  }
  if (!wanda && !args.act_norms.empty()) {
    return Error(fmt::format("--act-norms '{}': only used by --method wanda (method is {})", args.act_norms,
                             prune_method_name(job.method)));
  }
  auto filter = NameFilter::make(args.include, args.exclude);
  if (!filter.ok()) return filter.error();
  job.selected = filter->predicate();
  return job;
}

int run(const PruneArgs& args) {
  const bool model = is_model_source(args.input);
  if (!args.pattern_given) {
    return report_error(model ? "--pattern is required (nmkit convert MODEL -o OUT writes a model without pruning)"
                              : "--pattern is required");
  }
  if (model) {
    return run_prune_model({args.input, args.output, args.pattern, args.method, args.format, args.report,
                            args.include, args.exclude, args.model});
  }
  if (args.model.calib.permute) {  // a checkpoint's tensors are not known to form llama blocks
    return report_error("--permute needs a model (GGUF file or Hugging Face folder), not a checkpoint: " + args.input);
  }
  if (args.output.empty()) return report_error("-o: empty path");
  auto job = make_job(args);
  if (!job.ok()) return report_error(job.error());
  // Every file written must differ from every file read, the report included (issue 13, D1/D3).
  std::vector<FileRole> outputs{{"-o", job->output}};
  if (!args.report.empty()) outputs.push_back({"--report", args.report});
  std::vector<FileRole> inputs{{"input", job->input}};
  if (!job->grad_path.empty()) inputs.push_back({"--grad file", job->grad_path});
  if (!job->act_norms_path.empty()) inputs.push_back({"--act-norms file", job->act_norms_path});
  if (auto distinct = check_distinct_files(outputs, inputs); !distinct.ok()) return report_error(distinct.error());
  // The report's folder is checked before the long work, so an unwritable report path fails fast.
  if (!args.report.empty()) {
    auto probe = PendingFile::create(args.report);
    if (!probe.ok()) return report_error(probe.error());
  }

  Progress progress("writing");
  job->on_tensor = progress.tensor_callback();
  keep_freed_blocks_in_heap();
  auto prepared = prepare_prune_checkpoint(*job);
  progress.clear();
  if (!prepared.ok()) return report_error(prepared.error());
  const PruneOutcome* outcome = &prepared->outcome;

  // Both files complete and fsynced before the first rename (issue 13, M1): a report that cannot be
  // written leaves the old checkpoint in place.
  std::optional<PendingFile> report;
  if (!args.report.empty()) {
    auto file = prepare_text_file(args.report, prune_report(*job, *outcome).dump(2) + "\n");
    if (!file.ok()) return report_error(file.error());
    report.emplace(std::move(*file));
  }
  if (auto status = prepared->output.commit(); !status.ok()) return report_error(status.error());
  if (report) {
    if (auto status = report->commit(); !status.ok()) {
      return report_error(fmt::format("wrote {}, but not the report: {}", job->output, status.error().message()));
    }
  }

  fmt::print("{}", prune_table(*outcome));
  const double gb = static_cast<double>(outcome->input_bytes) / 1e9;
  fmt::print("pruned {} tensors to {} ({}, format {}), copied {} unchanged; wrote {} in {:.3f} s ({:.2f} GB/s of "
             "input; {:.3f} s producing tensors, {:.3f} s opening, allocating and syncing files)\n",
             outcome->tensors.size(), job->pattern.str(), prune_method_name(job->method),
             stored_format_name({job->format, job->layout}), outcome->copied_tensors, job->output, outcome->seconds,
             outcome->seconds > 0 ? gb / outcome->seconds : 0.0, outcome->fill_seconds,
             outcome->seconds - outcome->fill_seconds);
  if (outcome->tensors.empty()) {
    fmt::print("note: no tensor was selected (2-D F32/F16/BF16, --include '{}', --exclude '{}')\n", args.include,
               args.exclude);
  }
  if (report) fmt::print("report: {}\n", args.report);
  return 0;
}

const bool prune_registered = register_command(CommandSpec{
    "prune",
    "Prune a llama model (GGUF or Hugging Face folder) or a safetensors checkpoint to an N:M pattern",
    10,
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<PruneArgs>();
      app.add_option("input", args->input, "A model (GGUF file or Hugging Face folder), or a .safetensors checkpoint")
          ->required();
      app.add_option("-o,--output", args->output, "Written atomically. A model: OUT.gguf, a folder DIR/ (Hugging Face "
                     "layout), or from a Hugging Face folder OUT.safetensors (its weights alone); a checkpoint: "
                     "OUT.safetensors")->required();
      CLI::Option* pattern = app.add_option("--pattern", args->pattern, "N:M pattern keep:group, e.g. 2:4, 6:8 "
                                            "(1 <= keep < group <= 64); to write a model unpruned, use nmkit convert");
      app.add_option("--method", args->method, "magnitude | gradient (|w*g|, needs --grad) | wanda (|w|*a[k], "
                                               "needs --act-norms); for a model: magnitude | wanda | sparsegpt | admm, calibrated on --calib")
          ->capture_default_str();
      app.add_option("--grad", args->grad, "Gradients: one tensor per pruned weight, same name and shape");
      app.add_option("--act-norms", args->act_norms,
                     "Input-feature L2 norms: one 1-D [K] tensor per pruned weight, same name");
      app.add_option("--include", args->include, "Prune only tensors whose name this regex is found in (default: all); "
                     "a model's linears go by GGUF and Hugging Face name (blk.0.attn_q.weight, "
                     "model.layers.0.self_attn.q_proj.weight)");
      app.add_option("--exclude", args->exclude, "Never prune tensors whose name this regex is found in")
          ->capture_default_str();
      app.add_option("--format", args->format,
                     "dense (masked, original layout) | sparse24 (NAME.values + NAME.meta, 2:4/1:4 only) | "
                     "nm (NAME.values + NAME.mask) | cutlass_sm80 (sparse24 in CUTLASS's SM80 layout, F16/BF16)")
          ->capture_default_str();
      app.add_option("--report", args->report, "Write the metrics as JSON");
      add_model_prune_flags(app, args->model);
      return [args, pattern] {
        args->pattern_given = pattern->count() > 0;
        return run(*args);
      };
    },
});

}  // namespace
}  // namespace nmkit::cli
