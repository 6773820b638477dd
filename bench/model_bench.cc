#include "model_bench.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bandwidth.h"
#include "measure.h"
#include "peak_rss.h"
#include "nmkit/threads.h"

namespace nmkit::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int32_t argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) best = v[i] > v[best] ? i : best;
  return static_cast<int32_t>(best);
}

// Deterministic token ids spread over the vocabulary (llama-bench also times random tokens: speed does
// not depend on which tokens run).
std::vector<int32_t> prompt(int64_t n, int64_t n_vocab, uint32_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint32_t x = seed;
  for (auto& id : ids) {
    x = x * 1664525u + 1013904223u;
    id = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(n_vocab));
  }
  return ids;
}

struct Runner {
  ModelVariant variant;
  std::unique_ptr<LlamaModel> model;  // while the form is measured
  std::unique_ptr<LlamaSession> session;
  std::vector<double> decode_tps, prefill_tps;  // one per round
  // One per round: the read probe taken beside that round's decode (one form at a time: the mean of
  // the probes just before the form's build and just after it was freed, for every round).
  std::vector<double> probe_gbs;
  // Taken while the model is held (one_at_a_time frees it before the report).
  double bytes_per_token = 0, resident_bytes = 0, load_seconds = 0;
  size_t peak_rss = 0;  // one_at_a_time only
  std::string decode_kernel, prefill_kernel;
};

Result<double> time_decode(Runner& r, int64_t prompt_n, int64_t decode) {
  return measure_decode(*r.model, *r.session, prompt_n, decode);
}

Result<double> time_prefill(Runner& r, int64_t n) { return measure_prefill(*r.model, *r.session, n); }

struct LlamaCppResult {
  std::string label;
  double decode_tps = 0, prefill_tps = 0;
  std::string error;
  std::string note;  // how it had to be run, when not as asked
};

// One llama-bench run with `extra` arguments: its exit status (128 + N for signal N; -1 when it
// cannot be started) and its standard output (its standard error is discarded). Started with an
// argument vector, never through a shell: file names are passed as they are, so one holding quotes
// or "$(...)" is only a name (issue 24, item 3).
std::pair<int, std::string> llama_bench_once(const ModelBenchOptions& o, const LlamaCppFile& file,
                                             const std::vector<std::string>& extra) {
  std::vector<std::string> args = {o.llama_bench, "-m", file.path, "-t", std::to_string(o.llamacpp_threads),
                                   "-p", std::to_string(o.prefill_tokens), "-n", std::to_string(o.decode_tokens),
                                   "-r", "3"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"-o", "json"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {-1, ""};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  std::string text;
  if (spawned == 0) {
    char buffer[4096];
    ssize_t got;
    while ((got = ::read(out[0], buffer, sizeof buffer)) > 0 || (got < 0 && errno == EINTR)) {
      if (got > 0) text.append(buffer, static_cast<size_t>(got));
    }
  }
  ::close(out[0]);
  if (spawned != 0) return {-1, ""};
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return {-1, text};
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), text};
}

LlamaCppResult run_llama_bench(const ModelBenchOptions& o, const LlamaCppFile& file) {
  LlamaCppResult out;
  out.label = file.label;
  auto [status, text] = llama_bench_once(o, file, {});
  if (status == -1) {
    out.error = "cannot run " + o.llama_bench;
    return out;
  }
  if (status != 0) {
    // llama.cpp 0c1e57098 repacks Q8_0 weights for AMX where the CPU has it, and that path segfaults
    // on this project's Intel Xeon VMs (ggml_backend_amx_mul_mat, 2026-11-24); without the repack
    // it runs its AVX-512 kernels. Said next to the figures.
    const int first = status;
    std::tie(status, text) = llama_bench_once(o, file, {"--repack", "0"});
    if (status == 0) out.note = fmt::format("(--repack 0: llama-bench exited {} with its default repack)", first);
  }
  auto json = nlohmann::json::parse(text, nullptr, false);
  if (status != 0 || !json.is_array()) {
    out.error = fmt::format("llama-bench failed on {} (exit status {})", file.path, status);
    return out;
  }
  for (const auto& rec : json) {
    const double ts = rec.value("avg_ts", 0.0);
    if (rec.value("n_gen", 0) > 0) out.decode_tps = ts;
    else if (rec.value("n_prompt", 0) > 0) out.prefill_tps = ts;
  }
  return out;
}

// Median over rounds of the per-round ratio a[i] / b[i] (a shared machine drifts between rounds;
// a ratio taken within a round does not).
double median_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) r.push_back(a[i] / b[i]);
  return r.empty() ? 0.0 : median_of(r);
}

}  // namespace

Result<double> measure_decode(const LlamaModel& model, LlamaSession& session, int64_t prompt_n, int64_t decode) {
  const int64_t V = model.params().n_vocab;
  std::vector<float> logits(static_cast<size_t>(V));
  session.reset();
  auto ids = prompt(prompt_n, V, 7);
  NMKIT_TRY(model.forward(session, ids.data(), prompt_n, logits.data(), prompt_n - 1));
  int32_t next = argmax(logits.data(), V);
  const auto start = Clock::now();
  for (int64_t i = 0; i < decode; ++i) {
    NMKIT_TRY(model.forward(session, &next, 1, logits.data(), 0));
    next = argmax(logits.data(), V);
  }
  return static_cast<double>(decode) / seconds_since(start);
}

Result<double> measure_prefill(const LlamaModel& model, LlamaSession& session, int64_t n) {
  std::vector<float> logits(static_cast<size_t>(model.params().n_vocab));
  auto ids = prompt(n, model.params().n_vocab, 11);
  session.reset();
  const auto start = Clock::now();
  NMKIT_TRY(model.forward(session, ids.data(), n, logits.data(), n - 1));
  return static_cast<double>(n) / seconds_since(start);
}

std::vector<ModelVariant> default_model_variants() {
  std::vector<ModelVariant> v;
  const std::pair<const char*, DType> dtypes[] = {{"f32", DType::F32}, {"bf16", DType::BF16}, {"int8", DType::I8}};
  for (const auto& [name, dtype] : dtypes) {
    ModelOptions dense;
    dense.weights = dtype;
    v.push_back({std::string(name) + " dense", dense});
    ModelOptions s24 = dense;
    s24.pattern = Pattern{2, 4};
    s24.format = LinearFormat::Sparse24;
    v.push_back({std::string(name) + " 2:4 sparse24", s24});
    ModelOptions s68 = dense;
    s68.pattern = Pattern{6, 8};
    // INT8 6:8 decodes as nm (codes and bitmask: 0.875 bytes a weight, the slid form saves 3%).
    s68.format = LinearFormat::NM;
    v.push_back({std::string(name) + " 6:8 " + std::string(linear_format_name(s68.format)), s68});
  }
  return v;
}

bool forms_fit_at_once(const LlamaParams& p, const std::vector<ModelVariant>& variants) {
  const double hd = static_cast<double>(p.head_dim()), d = static_cast<double>(p.n_embd);
  const double per_block = d * hd * static_cast<double>(2 * p.n_head + 2 * p.n_head_kv) +
                           3.0 * d * static_cast<double>(p.n_ff);
  const double weights = static_cast<double>(p.n_layer) * per_block +
                         static_cast<double>(p.n_vocab) * d * (p.tied_output ? 1.0 : 2.0);
  double bytes = 0;
  for (const auto& v : variants) bytes += weights * static_cast<double>(dtype_size(v.options.weights));
  return bytes < 0.5 * static_cast<double>(available_memory_bytes());
}

namespace {

// Builds r's form, opens its session and runs it once untimed: first calls build lazily made forms
// and fault in pages. The warm-up prefill has the timed one's length: a form the plan picks only from
// 128 tokens (2:4 int8 on oneDNN) was otherwise built inside the first timed prefill (int8 2:4 read
// 377 tokens/s against dense's 958 in a one-round run).
Status prepare(Runner& r, const ModelBenchOptions& o) {
  const auto start = Clock::now();
  auto model = o.build(r.variant.options);
  if (!model.ok()) return model.error();
  r.load_seconds = seconds_since(start);
  r.model = std::make_unique<LlamaModel>(std::move(model.value()));
  constexpr int64_t kWarmDecode = 4;  // decode steps of the warm-up below
  const int64_t ctx = std::max(o.prefill_tokens, o.prompt_tokens + std::max(o.decode_tokens, kWarmDecode));
  auto session = LlamaSession::create(*r.model, ctx);
  if (!session.ok()) return session.error();
  r.session = std::make_unique<LlamaSession>(std::move(*session));
  r.bytes_per_token = static_cast<double>(r.model->weight_bytes_per_token());
  r.resident_bytes = static_cast<double>(r.model->resident_bytes());
  r.decode_kernel = r.model->linear_kernel_name(1);
  r.prefill_kernel = r.model->linear_kernel_name(o.prefill_tokens);
  auto d = time_decode(r, o.prompt_tokens, kWarmDecode);
  if (!d.ok()) return d.error();
  auto p = time_prefill(r, o.prefill_tokens);
  if (!p.ok()) return p.error();
  return ok_status();
}

Status time_round(Runner& r, const ModelBenchOptions& o, bool prefill) {
  auto tps = prefill ? time_prefill(r, o.prefill_tokens) : time_decode(r, o.prompt_tokens, o.decode_tokens);
  if (!tps.ok()) return tps.error();
  (prefill ? r.prefill_tps : r.decode_tps).push_back(*tps);
  return ok_status();
}

}  // namespace

int run_model_bench(const ModelBenchOptions& o) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  const auto fail = [](const Runner& r, const Error& e) {
    std::fprintf(stderr, "\nnmkit: %s: %s\n", r.variant.label.c_str(), e.message().c_str());
    return 1;
  };
  std::vector<Runner> runners;
  for (const auto& variant : o.variants) {
    runners.emplace_back();
    runners.back().variant = variant;
  }
  const bool rss_per_form = o.one_at_a_time && reset_peak_rss();
  if (!o.one_at_a_time) {
    for (auto& r : runners) {
      if (tty) std::fprintf(stderr, "\rbuilding %-24s", r.variant.label.c_str());
      if (Status st = prepare(r, o); !st.ok()) return fail(r, st.error());
    }
  }
  if (tty) std::fprintf(stderr, "\r%40s\r", "");
  // The probe beside each round (bench/bandwidth.h ReadProbe). One form at a time, its buffer would
  // count in the form's peak RSS, so each form is probed before it is built and after it is freed.
  std::vector<double> probes;  // every probe taken, for the header
  const auto probe_now = [&probes] { return probes.emplace_back(ReadProbe().measure().gbs); };
  if (o.one_at_a_time) {
    for (auto& r : runners) {
      const double probe_before = probe_now();
      if (rss_per_form) reset_peak_rss();
      if (tty) std::fprintf(stderr, "\rbuilding %-24s", r.variant.label.c_str());
      if (Status st = prepare(r, o); !st.ok()) return fail(r, st.error());
      for (int round = 0; round < o.rounds; ++round) {
        if (tty) std::fprintf(stderr, "\rround %d/%d %-24s", round + 1, o.rounds, r.variant.label.c_str());
        for (bool prefill : {false, true}) {
          if (Status st = time_round(r, o, prefill); !st.ok()) return fail(r, st.error());
        }
      }
      if (rss_per_form) r.peak_rss = peak_rss_bytes();
      r.session.reset();
      r.model.reset();
      r.probe_gbs.assign(r.decode_tps.size(), 0.5 * (probe_before + probe_now()));
    }
  } else {
    const ReadProbe probe;
    for (int round = 0; round < o.rounds; ++round) {
      for (bool prefill : {false, true}) {
        for (auto& r : runners) {
          if (tty) {
            std::fprintf(stderr, "\rround %d/%d %s %-24s", round + 1, o.rounds, prefill ? "prefill" : "decode ",
                         r.variant.label.c_str());
          }
          if (!prefill) r.probe_gbs.push_back(probes.emplace_back(probe.measure().gbs));
          if (Status st = time_round(r, o, prefill); !st.ok()) return fail(r, st.error());
        }
      }
    }
  }
  std::vector<LlamaCppResult> cpp;
  if (!o.llama_bench.empty()) {
    for (const auto& f : o.llamacpp_files) {
      if (tty) std::fprintf(stderr, "\rllama-bench %-24s", f.label.c_str());
      cpp.push_back(run_llama_bench(o, f));
    }
  }
  if (tty) std::fprintf(stderr, "\r%60s\r", "");

  const Runner& base = runners.front();
  const auto [probe_min, probe_max] = std::minmax_element(probes.begin(), probes.end());
  fmt::print("model {}: decode {} tokens after a {}-token prompt, prefill {} tokens; {} threads; "
             "{} {} rounds, medians; read bandwidth {:.1f} GB/s (median of {} probes beside the rounds, "
             "{:.1f}-{:.1f}; % read: median of same-round ratios)\n",
             o.model_label, o.decode_tokens, o.prompt_tokens, o.prefill_tokens, thread_count(), o.rounds,
             o.one_at_a_time ? "consecutive (one form at a time)" : "interleaved", median_of(probes), probes.size(),
             *probe_min, *probe_max);
  fmt::print("{:<20} {:>8} {:>8} {:>7} {:>10} {:>9} {:>8} {:>8} {:>7} {:>10} {:>8}  {}\n", "weights", "load s", "held GB",
             "RSS GB", "MB/token", "decode/s", "x base", "GB/s", "% read", "prefill/s", "x base",
             "kernel (decode, prefill)");
  // Issue 12's model target compares each pruned form's prefill with the fastest dense form of the
  // run (by median prefill), as the median of the same-round ratios: the medians of two forms can
  // come from different rounds of a drifting machine.
  const Runner* best_dense = nullptr;
  for (const auto& r : runners) {
    if (r.variant.options.pattern) continue;
    if (best_dense == nullptr || median_of(r.prefill_tps) > median_of(best_dense->prefill_tps)) best_dense = &r;
  }
  std::string against_dense;
  nlohmann::json records = nlohmann::json::array();
  for (const auto& r : runners) {
    const double bytes = r.bytes_per_token;
    const double dec = median_of(r.decode_tps), pre = median_of(r.prefill_tps);
    const double gbs = bytes * dec / 1e9;
    std::vector<double> round_gbs;  // the decode's GB/s of each round, against that round's probe
    for (const double tps : r.decode_tps) round_gbs.push_back(bytes * tps / 1e9);
    const double read_share = median_ratio(round_gbs, r.probe_gbs), read_gbs = median_of(r.probe_gbs);
    const double dec_ratio = median_ratio(r.decode_tps, base.decode_tps);
    const double pre_ratio = median_ratio(r.prefill_tps, base.prefill_tps);
    const std::string rss = r.peak_rss > 0 ? fmt::format("{:.2f}", static_cast<double>(r.peak_rss) / 1e9) : "-";
    fmt::print("{:<20} {:>8.1f} {:>8.2f} {:>7} {:>10.1f} {:>9.1f} {:>7.2f}x {:>8.1f} {:>6.0f}% {:>10.1f} {:>7.2f}x  {}, {}\n",
               r.variant.label, r.load_seconds, r.resident_bytes / 1e9, rss, bytes / 1e6, dec, dec_ratio, gbs,
               100.0 * read_share, pre, pre_ratio, r.decode_kernel, r.prefill_kernel);
    records.push_back({{"engine", "nmkit"}, {"variant", r.variant.label}, {"weight_bytes_per_token", bytes},
                       {"decode_tps", dec}, {"decode_tps_rounds", r.decode_tps}, {"prefill_tps", pre},
                       {"prefill_tps_rounds", r.prefill_tps}, {"decode_vs_base", dec_ratio},
                       {"prefill_vs_base", pre_ratio}, {"read_gbs", read_gbs}, {"read_gbs_rounds", r.probe_gbs},
                       {"read_share", read_share}, {"decode_gbs", gbs},
                       {"load_seconds", r.load_seconds}, {"resident_bytes", r.resident_bytes}});
    if (r.peak_rss > 0) records.back()["peak_rss_bytes"] = r.peak_rss;
    if (best_dense != nullptr && r.variant.options.pattern) {
      const double vs_dense = median_ratio(r.prefill_tps, best_dense->prefill_tps);
      records.back()["prefill_vs_best_dense"] = vs_dense;
      against_dense += fmt::format("{}{} {:.2f}x", against_dense.empty() ? "" : ", ", r.variant.label, vs_dense);
    }
  }
  if (!against_dense.empty()) {
    fmt::print("prefill against the fastest dense form ({}), median of same-round ratios: {}\n",
               best_dense->variant.label, against_dense);
  }
  if (!cpp.empty()) {
    fmt::print("llama.cpp llama-bench -t {} -r 3 (tg{}, pp{}), same run; nmkit {} against it:\n", o.llamacpp_threads,
               o.decode_tokens, o.prefill_tokens, base.variant.label);
    const double dec = median_of(base.decode_tps), pre = median_of(base.prefill_tps);
    for (const auto& c : cpp) {
      if (!c.error.empty()) {
        fmt::print("  {:<8} {}\n", c.label, c.error);
        continue;
      }
      fmt::print("  {:<8} decode {:>7.1f}/s (nmkit {:.2f}x)  prefill {:>7.1f}/s (nmkit {:.2f}x){}{}\n", c.label,
                 c.decode_tps, dec / c.decode_tps, c.prefill_tps, pre / c.prefill_tps, c.note.empty() ? "" : "  ",
                 c.note);
      records.push_back({{"engine", "llama.cpp"}, {"variant", c.label}, {"decode_tps", c.decode_tps},
                         {"prefill_tps", c.prefill_tps}, {"note", c.note}});
    }
  }
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << records.dump(1) << "\n";
    if (!out) return std::fprintf(stderr, "nmkit: cannot write %s\n", o.json_path.c_str()), 1;
  }
  return 0;
}

}  // namespace nmkit::bench
