// nmkit bench accuracy MODEL: the accuracy table of issue 11. Perplexity on the evaluation text
// (docs/design.md 11.4, ctx 512) of the dense model and of every pattern x method, each pruned from
// the dense model with calibration (docs/design.md section 12), in one run; the pruning seconds of
// each run split as CalibTimes counts them (forward passes, Hessian/norm accumulation, Cholesky,
// mask and updates); and the decode tokens/s of the forms each pattern runs in (f32: dense, 2:4 as
// sparse24, others as nm; int8: dense, 2:4 as sparse24, slidable patterns as slid), timed as `nmkit
// bench model` does (bench::measure_decode, 8-token prompt) in interleaved rounds after the
// perplexities. Decode speed depends on the form, not on which weights were kept, so it is timed
// once per pattern and form on a model pruned on load (by magnitude).
#include <fmt/core.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "tools/nmkit/calib_cli.h"
#include "tools/nmkit/cli_util.h"
#include "nmkit/files.h"
#include "tools/nmkit/command.h"
#include "nmkit/model_source.h"
#include "nmkit/perplexity.h"
#include "measure.h"
#include "model_bench.h"
#include "nmkit/threads.h"

namespace nmkit::cli {
namespace {

struct AccuracyArgs {
  std::string model;
  std::string text;
  int64_t ctx = 512;
  int64_t chunks = 0;
  std::string patterns = "6:8,4:8,2:4,1:4";
  std::string methods = "magnitude,wanda,sparsegpt";
  std::string json;
  int64_t decode = 64;  // tokens per decode timing (0: no decode column)
  int rounds = 3;
  CalibFlags calib;
};

// The forms a pattern runs in: f32 as make run's sweep does (2:4 as sparse24, any other as nm), and
// int8 (2:4 as sparse24, a slidable (2N-2):2N-or-sparser pattern as slid, others none; dense as dense).
struct RunForm {
  DType weights = DType::F32;
  LinearFormat format = LinearFormat::Dense;
  std::string name() const {
    return std::string(weights == DType::F32 ? "f32 " : "int8 ") + std::string(linear_format_name(format));
  }
};
RunForm f32_form(const std::optional<Pattern>& pattern) {
  if (!pattern) return {};
  return {DType::F32, *pattern == Pattern{2, 4} ? LinearFormat::Sparse24 : LinearFormat::NM};
}
std::optional<RunForm> int8_form(const std::optional<Pattern>& pattern) {
  if (!pattern) return RunForm{DType::I8, LinearFormat::Dense};
  if (*pattern == Pattern{2, 4}) return RunForm{DType::I8, LinearFormat::Sparse24};
  if (pattern->slidable()) return RunForm{DType::I8, LinearFormat::Slid};
  return std::nullopt;
}
std::string form_key(const std::optional<Pattern>& pattern, const RunForm& form) {
  return (pattern ? pattern->str() : "dense") + " " + form.name();
}

// Median decode tokens/s of each pattern's forms (dense first), keyed by form_key, in interleaved rounds.
Result<std::map<std::string, double>> decode_speeds(const ModelSource& source, const std::vector<Pattern>& patterns,
                                                    int64_t decode, int rounds) {
  std::vector<std::optional<Pattern>> all{std::nullopt};
  for (Pattern p : patterns) all.push_back(p);
  std::vector<std::string> keys;
  std::vector<LlamaModel> models;
  Progress progress("decode timing");
  for (const auto& pattern : all) {
    std::vector<RunForm> forms{f32_form(pattern)};
    if (auto f = int8_form(pattern)) forms.push_back(*f);
    for (const RunForm& form : forms) {
      ModelOptions options;
      options.pattern = pattern;
      options.weights = form.weights;
      options.format = form.format;
      auto model = LlamaModel::build(source.params(), source.tensors(), options);
      if (!model.ok()) return model.error();
      models.push_back(std::move(*model));
      keys.push_back(form_key(pattern, form));
    }
  }
  std::vector<std::vector<double>> speeds(models.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < models.size(); ++i) {
      progress.update(static_cast<size_t>(r) * models.size() + i + 1, models.size() * static_cast<size_t>(rounds),
                      keys[i]);
      LlamaSession session(models[i], 8 + decode);
      if (r == 0) {  // untimed: first calls build lazily made forms
        auto warm = bench::measure_decode(models[i], session, 8, 2);
        if (!warm.ok()) return warm.error();
      }
      auto tps = bench::measure_decode(models[i], session, 8, decode);
      if (!tps.ok()) return tps.error();
      speeds[i].push_back(*tps);
    }
  }
  std::map<std::string, double> out;
  for (size_t i = 0; i < models.size(); ++i) out[keys[i]] = bench::median_of(speeds[i]);
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Result<std::string> eval_text_path(const std::string& flag) {
  if (!flag.empty()) return flag;
  for (const char* p : {".cache/texts/sherlock-holmes.txt"}) {
    if (std::ifstream(p).good()) return std::string(p);
  }
  return Error("no evaluation text: pass --text FILE (scripts/fetch_texts.sh eval fetches the project's)");
}

int run(const AccuracyArgs& args) {
  std::vector<Pattern> patterns;
  for (const std::string& p : split(args.patterns)) {
    auto pattern = Pattern::parse(p);
    if (!pattern.ok()) return report_error(pattern.error().with_context("--patterns: "));
    patterns.push_back(*pattern);
  }
  std::vector<CalibMethod> methods;
  for (const std::string& m : split(args.methods)) {
    auto method = parse_calib_method(m);
    if (!method.ok()) return report_error(method.error().with_context("--methods: "));
    methods.push_back(*method);
  }
  if (!args.json.empty()) {
    auto probe = PendingFile::create(args.json);
    if (!probe.ok()) return report_error(probe.error());
  }
  auto source = ModelSource::open(args.model);
  if (!source.ok()) return report_error(source.error());
  auto tokenizer = load_tokenizer(*source);
  if (!tokenizer.ok()) return report_error(tokenizer.error());
  auto text_path = eval_text_path(args.text);
  if (!text_path.ok()) return report_error(text_path.error());
  std::ifstream in(*text_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto tokens = tokenizer->encode(ss.str(), tokenizer->add_bos(), false);
  if (!tokens.ok()) return report_error(tokens.error().with_context(*text_path + ": "));
  PerplexityOptions popt;
  popt.ctx = args.ctx;
  popt.max_chunks = args.chunks;
  popt.bos = tokenizer->bos();
  popt.add_bos = tokenizer->add_bos();

  if (args.decode < 0 || args.rounds < 1) return report_error("--decode must be >= 0 and --rounds >= 1");
  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::vector<std::string>> cells;  // the table's rows before the decode columns
  std::vector<std::optional<Pattern>> forms_of_row;
  double dense_ppl = 0;
  auto evaluate = [&](const std::optional<Pattern>& pattern, CalibMethod method) -> Status {
    ModelOptions options;
    options.keep_dense_weights = pattern.has_value();
    auto model = LlamaModel::build(source->params(), source->tensors(), options);
    if (!model.ok()) return model.error();
    double prune_seconds = 0;
    std::optional<CalibRun> calib;
    if (pattern) {
      auto r = calibrate_model(*model, &*tokenizer, *pattern, method, args.calib, CalibLinearFormat::Dense);
      if (!r.ok()) return r.error();
      prune_seconds = r->report.seconds.total;
      std::fprintf(stderr, "%s\n", calib_summary(*r, *pattern, method).c_str());
      calib = std::move(*r);
    }
    auto ppl = perplexity(*model, *tokens, popt);
    if (!ppl.ok()) return ppl.error();
    if (!pattern) dense_ppl = ppl->perplexity;
    const std::string pat = pattern ? pattern->str() : "dense";
    const std::string meth = pattern ? std::string(calib_method_name(method)) : "-";
    const CalibTimes t = calib ? calib->report.seconds : CalibTimes{};
    auto secs = [&](double v) { return calib ? fmt::format("{:.1f}", v) : std::string("-"); };
    cells.push_back({pat, meth, fmt::format("{:.3f}", ppl->perplexity),
                     dense_ppl > 0 ? fmt::format("{:.3f}", ppl->perplexity / dense_ppl) : "-", secs(prune_seconds),
                     secs(t.forward), secs(t.stats), secs(t.cholesky), secs(t.prune),
                     fmt::format("{:.1f}", ppl->seconds)});
    forms_of_row.push_back(pattern);
    rows.push_back({{"pattern", pat}, {"method", meth}, {"perplexity", ppl->perplexity},
                    {"chunks", ppl->chunks}, {"prune_seconds", prune_seconds}, {"eval_seconds", ppl->seconds},
                    {"prune_times", calib ? calib_report_json(*calib, *pattern, method)["seconds"] : nlohmann::json()}});
    std::fprintf(stderr, "%s %s: perplexity %.3f\n", pat.c_str(), meth.c_str(), ppl->perplexity);
    return ok_status();
  };
  if (Status st = evaluate(std::nullopt, CalibMethod::Magnitude); !st.ok()) return report_error(st.error());
  for (Pattern p : patterns) {
    for (CalibMethod m : methods) {
      if (Status st = evaluate(p, m); !st.ok()) return report_error(st.error());
    }
  }
  std::map<std::string, double> decode;
  if (args.decode > 0) {
    auto speeds = decode_speeds(*source, patterns, args.decode, args.rounds);
    if (!speeds.ok()) return report_error(speeds.error());
    decode = std::move(*speeds);
  }
  fmt::print("{} perplexity on {} (ctx {}{}), calibration {} x {} tokens{}\n", args.model, *text_path, args.ctx,
             args.chunks > 0 ? fmt::format(", {} chunks", args.chunks) : "", args.calib.seqs, args.calib.len,
             args.calib.refit > 0 ? fmt::format(", refit {} steps", args.calib.refit) : "");
  fmt::print("prune s = forward passes + Hessian/norms + Cholesky + mask and updates (+ output error, packing); "
             "decode: {} tokens after an 8-token prompt, median of {} interleaved rounds, {} threads\n",
             args.decode, args.rounds, thread_count());
  Table table({"pattern", "method", "perplexity", "x dense", "prune s", "forward s", "hessian s", "cholesky s",
               "update s", "eval s", "f32 form", "decode tok/s", "int8 form", "decode tok/s"});
  for (size_t i = 0; i < cells.size(); ++i) {
    std::vector<std::string> row = cells[i];
    const std::optional<Pattern>& pattern = forms_of_row[i];
    nlohmann::json speeds = nlohmann::json::object();
    std::vector<std::optional<RunForm>> forms{f32_form(pattern), int8_form(pattern)};
    for (const auto& form : forms) {
      row.push_back(form ? form->name() : "-");
      const auto it = form ? decode.find(form_key(pattern, *form)) : decode.end();
      row.push_back(it == decode.end() ? std::string("-") : fmt::format("{:.1f}", it->second));
      if (it != decode.end()) speeds[form->name()] = it->second;
    }
    rows[i]["decode_tps"] = speeds;
    table.add_row(row);
  }
  fmt::print("{}", table.render());
  if (!args.json.empty()) {
    nlohmann::json doc = {{"model", args.model}, {"text", *text_path}, {"ctx", args.ctx},
                          {"calib_seqs", args.calib.seqs}, {"calib_len", args.calib.len},
                          {"refit", args.calib.refit}, {"decode_tokens", args.decode}, {"rows", rows}};
    auto file = prepare_text_file(args.json, doc.dump(2) + "\n");
    if (!file.ok()) return report_error(file.error());
    if (Status st = file->commit(); !st.ok()) return report_error(st.error());
  }
  return 0;
}

const bool registered = register_command(CommandSpec{
    "bench accuracy",
    "Perplexity of dense and pruned models (patterns x magnitude/wanda/sparsegpt; --methods also admm), "
    "the accuracy table",
    60,
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<AccuracyArgs>();
      app.add_option("model", args->model, "GGUF file or Hugging Face directory")->required();
      app.add_option("--text", args->text, "Evaluation text (default: scripts/fetch_texts.sh eval)");
      app.add_option("--ctx", args->ctx, "Context per chunk")->capture_default_str();
      app.add_option("--chunks", args->chunks, "At most this many chunks (0: all)")->capture_default_str();
      app.add_option("--patterns", args->patterns, "Comma-separated patterns")->capture_default_str();
      app.add_option("--methods", args->methods, "Comma-separated methods")->capture_default_str();
      app.add_option("--json", args->json, "Write the table as JSON");
      app.add_option("--decode", args->decode, "Tokens per decode timing of each pattern's form (0: none)")
          ->capture_default_str();
      app.add_option("--rounds", args->rounds, "Interleaved decode timing rounds (median)")->capture_default_str();
      add_calib_flags(app, args->calib);
      return [args] { return run(*args); };
    },
});

}  // namespace
}  // namespace nmkit::cli
