#include "tools/nmkit/calib_cli.h"

#include <fmt/core.h>

#include <filesystem>

#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/memory.h"
#include "tools/nmkit/prune_report.h"  // section3_metrics_json: the per-tensor report fields

namespace nmkit::cli {

void add_calib_flags(CLI::App& app, CalibFlags& flags) {
  app.add_option("--calib", flags.calib,
                 "Calibration text for wanda/sparsegpt/admm (default: the project's, scripts/fetch_texts.sh calib)");
  app.add_option("--calib-seqs", flags.seqs, "Calibration sequences")->capture_default_str();
  app.add_option("--calib-len", flags.len, "Tokens per calibration sequence")->capture_default_str();
  app.add_option("--refit", flags.refit,
                 "After wanda/sparsegpt/admm, refit the kept weights by least squares on the calibration "
                 "inputs: conjugate-gradient steps per linear (0: off)")
      ->capture_default_str();
  app.add_flag("--swaps", flags.swaps,
               "After the mask (before --refit), swap a kept and a pruned weight of one group while the exact "
               "change of the output error on the calibration inputs says so (docs/design.md 12.3)");
  app.add_option("--dense-targets", flags.dense_targets,
                 "Before pruning, move each linear this fraction (0 to 1; 0: off) of the way to the weight whose "
                 "outputs on the pruned model's inputs are the dense model's outputs on its own (docs/design.md "
                 "12.4): the dense model runs beside the pruned one, so each block corrects some of the error the "
                 "blocks before it left")
      ->capture_default_str();
  app.add_flag("--permute", flags.permute,
               "Before pruning a block, reorder its feed-forward channels and each kv group's value channels "
               "so that the masks of ffn_down and attn_output keep the most importance (the model computes "
               "the same function; docs/design.md 12.2)");
}

Result<std::string> calibration_text_path(const std::string& flag) {
  namespace fs = std::filesystem;
  if (!flag.empty()) return flag;
  std::vector<fs::path> candidates{fs::path(".cache/texts/tom-sawyer.txt")};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      candidates.push_back(dir / ".cache/texts/tom-sawyer.txt");
    }
  }
  for (const fs::path& p : candidates) {
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return Error("no calibration text: pass --calib FILE (scripts/fetch_texts.sh calib fetches the project's)");
}

Result<CalibTextOptions> calib_text_options(Pattern pattern, CalibMethod method, const CalibFlags& flags,
                                            CalibLinearFormat format) {
  CalibTextOptions options;
  options.method = method;
  options.pattern = pattern;
  options.n_seq = flags.seqs;
  options.seq_len = flags.len;
  options.refit_steps = flags.refit;
  options.permute = flags.permute;
  options.swaps = flags.swaps;
  options.dense_targets = flags.dense_targets;
  options.permute_inputs = flags.permute_inputs;
  options.format = format;
  if (!(flags.dense_targets >= 0 && flags.dense_targets <= 1)) {
    return Error(fmt::format("--dense-targets {} is outside 0..1", flags.dense_targets));
  }
  if (needs_calibration_passes(method, flags.refit, flags.swaps, flags.dense_targets > 0)) {
    auto path = calibration_text_path(flags.calib);
    if (!path.ok()) return path.error();
    options.text_path = *path;
  }
  return options;
}

void show_calib_progress(Progress& progress, CalibTextOptions& options) {
  if (!progress.enabled()) return;
  options.on_block = [&progress](int64_t b, int64_t n) {
    progress.update(static_cast<size_t>(b + 1), static_cast<size_t>(n), "blk." + std::to_string(b));
  };
}

Result<CalibRun> calibrate_model(LlamaModel& model, const Tokenizer* tokenizer, Pattern pattern,
                                 CalibMethod method, const CalibFlags& flags, CalibLinearFormat format) {
  auto options = calib_text_options(pattern, method, flags, format);
  if (!options.ok()) return options.error();
  // Its callers (bench accuracy, eval) report perplexity, never the per-linear output errors, which
  // cost a product with H per linear (twice with a refit) and for Wanda a Hessian as well: those run
  // only for `nmkit prune --report` (docs/design.md 12).
  options->output_error = false;
  Progress progress(std::string(calib_method_name(method)) + " " + pattern.str());
  show_calib_progress(progress, *options);
  // What an out-of-memory line names (tools/nmkit/memory.h): the text is read and tokenized whole.
  MemoryActivity activity(std::string(calib_method_name(method)) + " pruning" +
                          (options->text_path.empty() ? "" : " on " + options->text_path));
  auto run = nmkit::calibrate_model(model, tokenizer, *options);
  progress.clear();
  return run;
}

nlohmann::json calib_report_json(const CalibRun& run, Pattern pattern, CalibMethod method) {
  using nlohmann::json;
  const CalibReport& r = run.report;
  json linears = json::array();
  PruneSums total;
  for (const LinearReport& l : r.linears) {
    total += l.sums;
    json e = section3_metrics_json(l.sums);
    e.update({{"name", l.name},
              {"block", l.block},
              {"weight_relative_error", l.weight_relative_error},
              {"output_error", l.output_error ? json(*l.output_error) : json(nullptr)},
              {"output_error_tokens", l.error_tokens},
              {"seconds", l.seconds}});
    if (method == CalibMethod::SparseGpt || method == CalibMethod::Admm) {
      e["damping"] = l.damping;
      e["dead_inputs"] = l.dead_inputs;
    }
    if (r.swaps) e["swaps"] = l.swaps;
    if (l.refit_before) {
      e["output_error_before_refit"] = *l.refit_before;
    }
    linears.push_back(std::move(e));
  }
  const PruneMetrics tm = metrics_from(total);
  const CalibTimes& t = r.seconds;
  json permutations = json::array();
  for (const PermutationReport& p : r.permutations) {
    permutations.push_back({{"name", p.name}, {"block", p.block}, {"identity_kept", p.identity_kept},
                            {"kept", p.kept}, {"steps", p.steps}});
  }
  return json{{"pattern", pattern.str()},
              {"method", calib_method_name(method)},
              {"calibration",
               {{"text", run.text_path}, {"text_tokens", run.text_tokens}, {"sequences", r.n_seq},
                {"sequence_length", r.seq_len}, {"refit_steps", r.refit_steps}, {"swaps", r.swaps},
                {"permute", !r.permutations.empty()}, {"dense_targets", r.dense_targets}}},
              {"seconds",
               {{"total", t.total}, {"forward", t.forward}, {"statistics", t.stats}, {"cholesky", t.cholesky},
                {"prune", t.prune}, {"swaps", t.swap}, {"refit", t.refit}, {"output_error", t.error}, {"pack", t.pack},
                {"permute", t.permute}, {"retarget", t.retarget}}},
              {"total",
               {{"pruned_count", tm.pruned_count}, {"total_count", tm.total_count},
                {"sparsity_percent", tm.sparsity_percent}, {"relative_error", tm.relative_error},
                {"retained_l1", tm.retained_l1}}},
              {"linears", linears},
              {"permutations", permutations}};
}

std::string calib_summary(const CalibRun& run, Pattern pattern, CalibMethod method) {
  const CalibReport& r = run.report;
  const CalibTimes& t = r.seconds;
  std::string what = fmt::format("{} {}", calib_method_name(method), pattern.str());
  if (needs_calibration_passes(method, r.refit_steps, r.swaps, r.dense_targets > 0)) {
    what += fmt::format(" on {} x {} calibration tokens", r.n_seq, r.seq_len);
  }
  if (r.dense_targets > 0) what += fmt::format(", dense targets {:g} ({:.1f} s)", r.dense_targets, t.retarget);
  if (r.swaps) {
    int64_t swaps = 0;
    for (const LinearReport& l : r.linears) swaps += l.swaps;
    what += fmt::format(", {} in-group swaps ({:.1f} s)", swaps, t.swap);
  }
  if (r.refit_steps > 0) what += fmt::format(", refit {} steps", r.refit_steps);
  if (!r.permutations.empty()) {
    double before = 0, after = 0;
    for (const PermutationReport& p : r.permutations) {
      before += p.identity_kept;
      after += p.kept;
    }
    what += fmt::format(", permuted ({:.1f} s; kept importance of the permuted readers x{:.4f})", t.permute,
                        before > 0 ? after / before : 1.0);
  }
  return fmt::format(
      "{}: {:.1f} s (forward {:.1f}, statistics {:.1f}, Cholesky {:.1f}, pruning {:.1f}, refit {:.1f}, "
      "output error {:.1f}, packing {:.1f})",
      what, t.total, t.forward, t.stats, t.cholesky, t.prune, t.refit, t.error, t.pack);
}

}  // namespace nmkit::cli
