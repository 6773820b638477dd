#include "tools/nmkit/calib_cli.h"

#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>

#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/memory.h"
#include "tools/nmkit/model_cli.h"  // check_vocabulary
#include "tools/nmkit/prune_report.h"  // section3_metrics_json: the per-tensor report fields
#include "tools/nmkit/text_file.h"

namespace nmkit::cli {

void add_calib_flags(CLI::App& app, CalibFlags& flags) {
  app.add_option("--calib", flags.calib,
                 "Calibration text for wanda/sparsegpt (default: the project's, scripts/fetch_texts.sh calib)");
  app.add_option("--calib-seqs", flags.seqs, "Calibration sequences")->capture_default_str();
  app.add_option("--calib-len", flags.len, "Tokens per calibration sequence")->capture_default_str();
  app.add_option("--refit", flags.refit,
                 "After wanda/sparsegpt, refit the kept weights by least squares on the calibration "
                 "inputs: conjugate-gradient steps per linear (0: off)")
      ->capture_default_str();
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

Result<Tokenizer> source_tokenizer(const ModelSource& source) {
  Result<Tokenizer> tokenizer = Error(source.path() + ": no tokenizer.json in the model folder");
  if (source.gguf() != nullptr) {
    tokenizer = Tokenizer::from_gguf(*source.gguf());
  } else if (!source.tokenizer_json().empty()) {
    tokenizer = Tokenizer::from_hf_json(source.tokenizer_json());
  }
  if (tokenizer.ok()) NMKIT_TRY(check_vocabulary(source.path(), *tokenizer, source.params()));
  return tokenizer;
}

Result<CalibRun> calibrate_model(LlamaModel& model, const Tokenizer* tokenizer, Pattern pattern,
                                 CalibMethod method, const CalibFlags& flags, CalibLinearFormat format,
                                 std::function<bool(std::string_view name)> selected) {
  CalibRun run;
  CalibOptions options;
  options.selected = std::move(selected);
  options.pattern = pattern;
  options.method = method;
  options.format = format;
  options.refit_steps = flags.refit;
  std::vector<int32_t> tokens;
  int64_t n_seq = 0;
  if (needs_calibration(method) || flags.refit > 0) {
    if (flags.seqs < 1 || flags.len < 1) {
      return Error("--calib-seqs and --calib-len must be >= 1, got " + std::to_string(flags.seqs) + " and " +
                   std::to_string(flags.len));
    }
    if (flags.len > model.params().n_ctx_train && model.params().n_ctx_train > 0) {
      return Error("--calib-len " + std::to_string(flags.len) + " exceeds the model's context length " +
                   std::to_string(model.params().n_ctx_train));
    }
    if (tokenizer == nullptr) return Error("calibration needs the model's tokenizer");
    auto path = calibration_text_path(flags.calib);
    if (!path.ok()) return path.error();
    run.text_path = *path;
    auto text = TextFile::open("--calib", *path);
    if (!text.ok()) return text.error();
    auto ids = tokenize_text(*text, *tokenizer, 0);  // the windows spread over the whole text
    if (!ids.ok()) return ids.error();
    run.text_tokens = static_cast<int64_t>(ids->ids.size());
    auto seqs = calibration_sequences(ids->ids, flags.seqs, flags.len, *path);
    if (!seqs.ok()) return seqs.error();
    tokens = std::move(*seqs);
    n_seq = static_cast<int64_t>(tokens.size()) / flags.len;
  }
  Progress progress(std::string(calib_method_name(method)) + " " + pattern.str());
  if (progress.enabled()) {
    options.on_block = [&progress](int64_t b, int64_t n) {
      progress.update(static_cast<size_t>(b + 1), static_cast<size_t>(n), "blk." + std::to_string(b));
    };
  }
  MemoryActivity activity(std::string(calib_method_name(method)) + " pruning");
  auto report = calibrate_and_prune(model, tokens, n_seq, flags.len, options);
  progress.clear();
  if (!report.ok()) return report.error();
  run.report = std::move(*report);
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
    if (method == CalibMethod::SparseGpt) {
      e["damping"] = l.damping;
      e["dead_inputs"] = l.dead_inputs;
    }
    if (l.refit_before) {
      e["output_error_before_refit"] = *l.refit_before;
    }
    linears.push_back(std::move(e));
  }
  const PruneMetrics tm = metrics_from(total);
  const CalibTimes& t = r.seconds;
  return json{{"pattern", pattern.str()},
              {"method", calib_method_name(method)},
              {"calibration",
               {{"text", run.text_path}, {"text_tokens", run.text_tokens}, {"sequences", r.n_seq},
                {"sequence_length", r.seq_len}, {"refit_steps", r.refit_steps}}},
              {"seconds",
               {{"total", t.total}, {"forward", t.forward}, {"statistics", t.stats}, {"cholesky", t.cholesky},
                {"prune", t.prune}, {"refit", t.refit}, {"output_error", t.error}, {"pack", t.pack}}},
              {"total",
               {{"pruned_count", tm.pruned_count}, {"total_count", tm.total_count},
                {"sparsity_percent", tm.sparsity_percent}, {"relative_error", tm.relative_error},
                {"retained_l1", tm.retained_l1}}},
              {"linears", linears}};
}

std::string calib_summary(const CalibRun& run, Pattern pattern, CalibMethod method) {
  const CalibReport& r = run.report;
  const CalibTimes& t = r.seconds;
  std::string what = fmt::format("{} {}", calib_method_name(method), pattern.str());
  if (needs_calibration(method) || r.refit_steps > 0) {
    what += fmt::format(" on {} x {} calibration tokens", r.n_seq, r.seq_len);
  }
  if (r.refit_steps > 0) what += fmt::format(", refit {} steps", r.refit_steps);
  return fmt::format(
      "{}: {:.1f} s (forward {:.1f}, statistics {:.1f}, Cholesky {:.1f}, pruning {:.1f}, refit {:.1f}, "
      "output error {:.1f}, packing {:.1f})",
      what, t.total, t.forward, t.stats, t.cholesky, t.prune, t.refit, t.error, t.pack);
}

}  // namespace nmkit::cli
