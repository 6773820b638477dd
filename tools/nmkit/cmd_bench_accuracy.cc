// nmkit bench accuracy MODEL: the accuracy table of issue 11 and the points of issue 28's chart.
// Perplexity on the evaluation text (docs/design.md 11.4, ctx 512) of the dense model and of every
// pattern x method (ADMM only at the --admm patterns), each pruned from the dense model with
// calibration (docs/design.md section 12), in one run; the pruning seconds of each run split as
// CalibTimes counts them (forward passes, Hessian/norm accumulation, Cholesky, mask and updates).
// Each form is evaluated as itself: the dense model in f32, bf16 and int8, and the pruned weights
// of every run in f32 and repacked in int8 (2:4 as sparse24, slidable patterns as slid). Then the
// decode tokens/s of every form (f32: dense, 2:4 as sparse24, others as nm; bf16 dense; int8 as
// above), timed as `nmkit bench model` does (bench::measure_decode, 8-token prompt) in interleaved
// rounds after every perplexity, and the bytes of its weights (LlamaModel::estimate_bytes). --json
// writes the table's rows and the chart's points (scripts/accuracy_chart.py draws them).
#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>

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
  std::string admm;  // patterns also pruned by ADMM
  std::string json;
  std::string resume;  // a JSON of an earlier run (partial or not): its rows are taken, not run again
  int64_t decode = 64;  // tokens per decode timing (0: no decode column)
  int rounds = 3;
  CalibFlags calib;
};

// The forms a pattern runs in: f32 as make run's sweep does (2:4 as sparse24, any other as nm), and
// int8 (2:4 as sparse24, a slidable (2N-2):2N-or-sparser pattern as slid, any other dense-masked int8).
// Dense: f32, bf16 and int8 dense.
ModelOptions form_of(DType weights, const std::optional<Pattern>& pattern) {
  ModelOptions o;
  o.weights = weights;
  o.pattern = pattern;
  if (!pattern) return o;
  if (*pattern == Pattern{2, 4}) {
    o.format = LinearFormat::Sparse24;
  } else if (weights == DType::I8) {
    o.format = pattern->slidable() ? LinearFormat::Slid : LinearFormat::Dense;
  } else {
    o.format = LinearFormat::NM;
  }
  return o;
}
std::vector<ModelOptions> forms_of(const std::optional<Pattern>& pattern) {
  if (!pattern) return {form_of(DType::F32, pattern), form_of(DType::BF16, pattern), form_of(DType::I8, pattern)};
  return {form_of(DType::F32, pattern), form_of(DType::I8, pattern)};
}
// "f32 nm", "int8 slid": the form without its pattern (the table's columns, the rows' JSON keys).
std::string short_name(const ModelOptions& o) {
  return std::string(o.weights == DType::F32 ? "f32 " : o.weights == DType::BF16 ? "bf16 " : "int8 ") +
         std::string(linear_format_name(o.format));
}

// Median decode tokens/s of every form, keyed by weight_form_name ("int8 6:8 slid"), in interleaved
// rounds. Decode speed depends on the form, not on which weights were kept: each form is timed once,
// on a model pruned on load by magnitude.
Result<std::map<std::string, double>> decode_speeds(const ModelSource& source, const std::vector<ModelOptions>& forms,
                                                    int64_t decode, int rounds) {
  std::vector<std::string> keys;
  std::vector<LlamaModel> models;
  Progress progress("decode timing");
  for (const ModelOptions& options : forms) {
    auto model = LlamaModel::build(source.params(), source.tensors(), options);
    if (!model.ok()) return model.error();
    models.push_back(std::move(*model));
    keys.push_back(weight_form_name(options));
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

// The calibrated model's pruned weights (kept dense f32 next to the model's linears) repacked in
// `form` (int8: quantized per row, docs/design.md 6) into a model built from `source` in form.weights,
// so that the int8 perplexity is the int8 form's own, not the f32 one's.
Result<LlamaModel> repack_pruned(const ModelSource& source, const LlamaModel& pruned, const ModelOptions& form) {
  ModelOptions options;
  options.weights = form.weights;
  auto model = LlamaModel::build(source.params(), source.tensors(), options);
  if (!model.ok()) return model.error();
  for (int64_t b = 0; b < source.params().n_layer; ++b) {
    std::vector<TensorView> weights;
    for (const std::string& name : LlamaModel::block_linear_names()) {
      auto w = pruned.dense_weight(b, name);
      if (!w.ok()) return w.error();
      weights.push_back(*w);
    }
    if (Status st = model->replace_block(b, weights, form.format, form.pattern); !st.ok()) return st.error();
  }
  return model;
}

// One point of the chart: a form of the model with its perplexity, the bytes its weights take
// (LlamaModel::estimate_bytes: block linears in the form, embedding/head and norms; what a checkpoint
// of it holds) and, filled in after every perplexity, its decode speed.
struct Point {
  std::string pattern, method;  // "dense", "-" for the dense forms
  ModelOptions form;
  double perplexity = 0;
  size_t bytes = 0;
  std::string name() const {
    return method == "-" ? weight_form_name(form) : method + " " + weight_form_name(form);
  }
};

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

nlohmann::json point_json(const Point& p, const std::map<std::string, double>& decode) {
  const auto it = decode.find(weight_form_name(p.form));
  const std::string weights = p.form.weights == DType::F32 ? "f32" : p.form.weights == DType::BF16 ? "bf16" : "int8";
  return {{"name", p.name()}, {"source", "nmkit"}, {"pattern", p.pattern}, {"method", p.method},
          {"weights", weights}, {"format", std::string(linear_format_name(p.form.format))},
          {"perplexity", p.perplexity}, {"weight_bytes", p.bytes},
          {"decode_tps", it == decode.end() ? nlohmann::json() : nlohmann::json(it->second)}};
}

Result<Point> point_from_json(const nlohmann::json& j) {
  try {
    Point p;
    p.pattern = j.at("pattern").get<std::string>();
    p.method = j.at("method").get<std::string>();
    auto weights = parse_weight_dtype(j.at("weights").get<std::string>());
    if (!weights.ok()) return weights.error();
    auto format = parse_linear_format(j.at("format").get<std::string>());
    if (!format.ok()) return format.error();
    p.form.weights = *weights;
    p.form.format = *format;
    if (p.pattern != "dense") {
      auto pattern = Pattern::parse(p.pattern);
      if (!pattern.ok()) return pattern.error();
      p.form.pattern = *pattern;
    }
    p.perplexity = j.at("perplexity").get<double>();
    p.bytes = j.at("weight_bytes").get<size_t>();
    return p;
  } catch (const nlohmann::json::exception& e) {
    return Error(std::string("a point without its fields: ") + e.what());
  }
}

// The table's cells of a row (before the decode columns), from its JSON.
std::vector<std::string> row_cells(const nlohmann::json& row, double dense_ppl) {
  const double ppl = row["perplexity"].get<double>();
  const nlohmann::json& t = row["prune_times"];
  auto secs = [&](const char* key) { return t.is_object() ? fmt::format("{:.1f}", t.value(key, 0.0)) : "-"; };
  return {row["pattern"].get<std::string>(), row["method"].get<std::string>(), fmt::format("{:.3f}", ppl),
          dense_ppl > 0 ? fmt::format("{:.3f}", ppl / dense_ppl) : "-", secs("total"), secs("forward"),
          secs("statistics"), secs("cholesky"), secs("prune"), fmt::format("{:.1f}", row["eval_seconds"].get<double>())};
}

const nlohmann::json* find_row(const nlohmann::json& doc, const std::string& pattern, const std::string& method) {
  if (!doc.is_object()) return nullptr;
  for (const nlohmann::json& row : doc["rows"]) {
    if (row.value("pattern", "") == pattern && row.value("method", "") == method) return &row;
  }
  return nullptr;
}

// --resume FILE: an earlier run's JSON, refused (naming the key) unless it measured what this run
// would: the same model, ctx, chunks and calibration sizes. Null without --resume.
Result<nlohmann::json> load_resumed(const AccuracyArgs& args) {
  if (args.resume.empty()) return nlohmann::json();
  std::ifstream in(args.resume);
  if (!in) return Error("--resume " + args.resume + ": cannot open");
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc["rows"].is_array() || !doc["points"].is_array()) {
    return Error("--resume " + args.resume + ": not a bench accuracy JSON (rows and points)");
  }
  const std::pair<const char*, nlohmann::json> same[] = {
      {"model", args.model}, {"ctx", args.ctx}, {"chunks", args.chunks}, {"calib_seqs", args.calib.seqs},
      {"calib_len", args.calib.len}, {"refit", args.calib.refit}};
  for (const auto& [key, value] : same) {
    if (doc[key] != value) {
      return Error(fmt::format("--resume {}: {} is {}, this run's {}", args.resume, key, doc[key].dump(), value.dump()));
    }
  }
  // Options later runs added, each with what its absence in an older JSON means (off).
  const std::tuple<const char*, nlohmann::json, nlohmann::json> added[] = {
      {"permute", args.calib.permute, false},
      {"swaps", args.calib.swaps, false},
      {"dense_targets", args.calib.dense_targets, 0.0}};
  for (const auto& [key, value, absent] : added) {
    const nlohmann::json was = doc.contains(key) ? doc[key] : absent;
    if (was != value) {
      return Error(fmt::format("--resume {}: {} is {}, this run's {}", args.resume, key, was.dump(), value.dump()));
    }
  }
  for (const nlohmann::json& row : doc["rows"]) {
    if (!row.is_object() || !row["perplexity"].is_number() || !row["pattern"].is_string() ||
        !row["method"].is_string() || !row["eval_seconds"].is_number()) {
      return Error("--resume " + args.resume + ": a row without its perplexity: " + row.dump());
    }
  }
  return doc;
}

Result<std::vector<Pattern>> parse_patterns(const std::string& list, const char* flag) {
  std::vector<Pattern> patterns;
  for (const std::string& p : split(list)) {
    auto pattern = Pattern::parse(p);
    if (!pattern.ok()) return pattern.error().with_context(std::string(flag) + ": ");
    patterns.push_back(*pattern);
  }
  return patterns;
}

int run(const AccuracyArgs& args) {
  auto patterns = parse_patterns(args.patterns, "--patterns");
  if (!patterns.ok()) return report_error(patterns.error());
  auto admm_patterns = parse_patterns(args.admm, "--admm");
  if (!admm_patterns.ok()) return report_error(admm_patterns.error());
  std::vector<CalibMethod> methods;
  for (const std::string& m : split(args.methods)) {
    auto method = parse_calib_method(m);
    if (!method.ok()) return report_error(method.error().with_context("--methods: "));
    methods.push_back(*method);
  }
  // Every pattern of --patterns or --admm, in order; ADMM runs at a pattern only when asked (it
  // costs several times SparseGPT's time).
  std::vector<std::pair<Pattern, std::vector<CalibMethod>>> runs;
  for (Pattern p : *patterns) runs.push_back({p, methods});
  for (Pattern p : *admm_patterns) {
    auto it = std::find_if(runs.begin(), runs.end(), [&](const auto& r) { return r.first == p; });
    if (it == runs.end()) it = runs.insert(runs.end(), {p, {}});
    if (std::find(it->second.begin(), it->second.end(), CalibMethod::Admm) == it->second.end()) {
      it->second.push_back(CalibMethod::Admm);
    }
  }
  if (!args.json.empty()) {
    auto probe = PendingFile::create(args.json);
    if (!probe.ok()) return report_error(probe.error());
  }
  auto resumed = load_resumed(args);
  if (!resumed.ok()) return report_error(resumed.error());
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
  std::vector<Point> points;
  double dense_ppl = 0;
  auto add_point = [&](const std::optional<Pattern>& pattern, const std::string& method, const ModelOptions& form,
                       const LlamaModel& model) -> Result<PerplexityResult> {
    auto ppl = perplexity(model, *tokens, popt);
    if (!ppl.ok()) return ppl.error();
    Point point{pattern ? pattern->str() : "dense", method, form, ppl->perplexity,
                LlamaModel::estimate_bytes(source->params(), form)};
    std::fprintf(stderr, "%s: perplexity %.3f\n", point.name().c_str(), ppl->perplexity);
    points.push_back(std::move(point));
    return ppl;
  };
  auto evaluate = [&](const std::optional<Pattern>& pattern, CalibMethod method) -> Status {
    const std::string pat = pattern ? pattern->str() : "dense";
    const std::string meth = pattern ? std::string(calib_method_name(method)) : "-";
    if (const nlohmann::json* row = find_row(*resumed, pat, meth)) {  // --resume: taken as it was
      for (const nlohmann::json& jp : (*resumed)["points"]) {
        if (jp.value("pattern", "") != pat || jp.value("method", "") != meth) continue;
        auto point = point_from_json(jp);
        if (!point.ok()) return point.error().with_context("--resume " + args.resume + ": ");
        points.push_back(std::move(*point));
      }
      if (!pattern) dense_ppl = (*row)["perplexity"].get<double>();
      cells.push_back(row_cells(*row, dense_ppl));
      forms_of_row.push_back(pattern);
      nlohmann::json r = *row;
      r.erase("decode_tps");
      rows.push_back(std::move(r));
      std::fprintf(stderr, "%s %s: from %s\n", pat.c_str(), meth.c_str(), args.resume.c_str());
      return ok_status();
    }
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
    // The f32 point: the pruned weights dense-masked in f32, which the f32 sparse forms (nm,
    // sparse24) compute exactly, up to float summation order.
    auto ppl = add_point(pattern, meth, form_of(DType::F32, pattern), *model);
    if (!ppl.ok()) return ppl.error();
    if (!pattern) dense_ppl = ppl->perplexity;
    // Every other form is evaluated as itself: the dense model built in bf16 and int8, the pruned
    // weights repacked in the int8 form.
    for (const ModelOptions& form : forms_of(pattern)) {
      if (form.weights == DType::F32) continue;
      auto other = pattern ? repack_pruned(*source, *model, form)
                           : LlamaModel::build(source->params(), source->tensors(), form);
      if (!other.ok()) return other.error();
      auto p = add_point(pattern, meth, form, *other);
      if (!p.ok()) return p.error();
    }
    rows.push_back({{"pattern", pat}, {"method", meth}, {"perplexity", ppl->perplexity},
                    {"chunks", ppl->chunks}, {"prune_seconds", prune_seconds}, {"eval_seconds", ppl->seconds},
                    {"prune_times", calib ? calib_report_json(*calib, *pattern, method)["seconds"] : nlohmann::json()}});
    cells.push_back(row_cells(rows.back(), dense_ppl));
    forms_of_row.push_back(pattern);
    return ok_status();
  };
  std::map<std::string, double> decode;
  // The JSON after every row (complete: false until the decode timings are in), so that a run cut
  // short keeps what it measured and --resume continues it.
  auto write_json = [&](bool complete) -> Status {
    if (args.json.empty()) return ok_status();
    nlohmann::json jpoints = nlohmann::json::array();
    for (const Point& p : points) jpoints.push_back(point_json(p, decode));
    nlohmann::json doc = {{"model", args.model}, {"text", *text_path}, {"ctx", args.ctx}, {"chunks", args.chunks},
                          {"calib_seqs", args.calib.seqs}, {"calib_len", args.calib.len},
                          {"refit", args.calib.refit}, {"permute", args.calib.permute}, {"swaps", args.calib.swaps},
                          {"dense_targets", args.calib.dense_targets},
                          {"decode_tokens", args.decode}, {"rounds", args.rounds},
                          {"threads", thread_count()}, {"complete", complete}, {"rows", rows}, {"points", jpoints}};
    auto file = prepare_text_file(args.json, doc.dump(2) + "\n");
    if (!file.ok()) return file.error();
    return file->commit();
  };
  if (Status st = evaluate(std::nullopt, CalibMethod::Magnitude); !st.ok()) return report_error(st.error());
  if (Status st = write_json(false); !st.ok()) return report_error(st.error());
  for (const auto& [p, ms] : runs) {
    for (CalibMethod m : ms) {
      if (Status st = evaluate(p, m); !st.ok()) return report_error(st.error());
      if (Status st = write_json(false); !st.ok()) return report_error(st.error());
    }
  }
  // Decode timings after every perplexity, in one pass (interleaved rounds over every form).
  if (args.decode > 0) {
    std::vector<ModelOptions> timed = forms_of(std::nullopt);
    for (const auto& r : runs) {
      for (const ModelOptions& f : forms_of(r.first)) timed.push_back(f);
    }
    auto speeds = decode_speeds(*source, timed, args.decode, args.rounds);
    if (!speeds.ok()) return report_error(speeds.error());
    decode = std::move(*speeds);
  }
  auto speed_of = [&](const ModelOptions& form) -> std::optional<double> {
    const auto it = decode.find(weight_form_name(form));
    if (it == decode.end()) return std::nullopt;
    return it->second;
  };
  fmt::print("{} perplexity on {} (ctx {}{}), calibration {} x {} tokens{}{}{}{}\n", args.model, *text_path,
             args.ctx, args.chunks > 0 ? fmt::format(", {} chunks", args.chunks) : "", args.calib.seqs, args.calib.len,
             args.calib.swaps ? ", in-group swaps" : "",
             args.calib.refit > 0 ? fmt::format(", refit {} steps", args.calib.refit) : "",
             args.calib.permute ? ", permuted" : "",
             args.calib.dense_targets > 0 ? fmt::format(", dense targets {:g}", args.calib.dense_targets) : "");
  fmt::print("prune s = forward passes + Hessian/norms + Cholesky + mask and updates (+ output error, packing); "
             "decode: {} tokens after an 8-token prompt, median of {} interleaved rounds, {} threads, "
             "timed after every perplexity\n",
             args.decode, args.rounds, thread_count());
  Table table({"pattern", "method", "perplexity", "x dense", "prune s", "forward s", "hessian s", "cholesky s",
               "update s", "eval s", "f32 form", "decode tok/s", "int8 form", "decode tok/s"});
  for (size_t i = 0; i < cells.size(); ++i) {
    std::vector<std::string> row = cells[i];
    nlohmann::json speeds = nlohmann::json::object();
    for (DType w : {DType::F32, DType::I8}) {
      const ModelOptions form = form_of(w, forms_of_row[i]);
      const auto tps = speed_of(form);
      row.push_back(short_name(form));
      row.push_back(tps ? fmt::format("{:.1f}", *tps) : std::string("-"));
      if (tps) speeds[short_name(form)] = *tps;
    }
    rows[i]["decode_tps"] = speeds;
    table.add_row(row);
  }
  fmt::print("{}", table.render());
  // The chart's points (scripts/accuracy_chart.py): every form evaluated as itself.
  Table chart({"form", "perplexity", "x dense", "decode tok/s", "weights MB"});
  for (const Point& p : points) {
    const auto tps = speed_of(p.form);
    chart.add_row({p.name(), fmt::format("{:.3f}", p.perplexity), fmt::format("{:.3f}", p.perplexity / dense_ppl),
                   tps ? fmt::format("{:.1f}", *tps) : std::string("-"),
                   fmt::format("{:.1f}", static_cast<double>(p.bytes) / 1e6)});
  }
  fmt::print("\n{}", chart.render());
  if (Status st = write_json(true); !st.ok()) return report_error(st.error());
  return 0;
}

const bool bench_accuracy_registered = register_command(CommandSpec{
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
      app.add_option("--admm", args->admm, "Patterns also pruned by ADMM (comma-separated; slow: ~15 min per "
                     "pattern on SmolLM2 on 2 loaded cores)");
      app.add_option("--json", args->json, "Write the table and the chart's points as JSON (after every row)");
      app.add_option("--resume", args->resume, "Take the rows of this earlier --json (same model, text, ctx, "
                     "chunks, calibration) instead of running them again");
      app.add_option("--decode", args->decode, "Tokens per decode timing of each pattern's form (0: none)")
          ->capture_default_str();
      app.add_option("--rounds", args->rounds, "Interleaved decode timing rounds (median)")->capture_default_str();
      add_calib_flags(app, args->calib);
      return [args] { return run(*args); };
    },
});

}  // namespace
}  // namespace nmkit::cli
