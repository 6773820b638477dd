// `nmkit bench linear`: nmkit's linear kernels next to OpenBLAS, oneDNN and Eigen in one run.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "nmkit/cpu.h"
#include "nmkit/pattern.h"
#include "nmkit/threads.h"

#include "linear_bench.h"

namespace nmkit::cli {
namespace {

// OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are read when OpenBLAS loads, before main: to benchmark the
// kernel OpenBLAS picks for this CPU, the process re-executes itself once without them (and with
// OMP_NUM_THREADS set to nmkit's thread count, which oneDNN and Eigen read when they load, and idle
// worker threads that sleep instead of spinning).
void reexec_without_openblas_overrides() {
  if (std::getenv("NMKIT_BENCH_REEXEC") != nullptr) return;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (args.empty()) return;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("OPENBLAS_L2_SIZE");
  setenv("OMP_NUM_THREADS", std::to_string(thread_count()).c_str(), 0);
  // Libraries take turns on the same cores: idle OpenMP (oneDNN, Eigen) and OpenBLAS workers would
  // otherwise spin for up to ~0.1 s after each call and steal the cores from the next kernel timed.
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
  setenv("NMKIT_BENCH_REEXEC", "1", 1);
  std::fflush(stdout);
  execv("/proc/self/exe", argv.data());
  // execv only returns on failure: carry on in this process with the overrides in place.
  std::fprintf(stderr, "nmkit bench linear: re-exec failed; OpenBLAS keeps OPENBLAS_CORETYPE\n");
}

const bool bench_linear_registered = register_command({
    "bench linear",
    "Dense and sparse linear layers: nmkit vs OpenBLAS, oneDNN and Eigen CSR on LLM layer shapes",
    50,
    [](CLI::App& app) -> std::function<int()> {
      struct Args {
        int64_t rows = 0, K = 0;
        std::string m = "1,16,64,256,512", pattern = "2:4,6:8", dtype = "f32,bf16,int8", json, shapes = "llama8b";
        double min_seconds = 0.2;
        bool no_baselines = false, own_kernels = false;
      };
      auto args = std::make_shared<Args>();
      app.add_option("--shapes", args->shapes,
                     "Layer shape sets, comma-separated: llama8b (4096x4096, 14336x4096), smollm2 (576x576, "
                     "192x576, 1536x576, 576x1536, 49152x576), 7b (4096x4096, 11008x4096, 4096x11008); rows x K")
          ->capture_default_str();
      app.add_option("--rows", args->rows, "Output features (overrides --shapes; default K 4096)");
      app.add_option("--k", args->K, "Input features (default: 4096)");
      app.add_option("--m", args->m, "Tokens per call, comma-separated")->capture_default_str();
      app.add_option("--pattern", args->pattern, "Patterns, comma-separated (2:4 runs as sparse24, others as nm)")
          ->capture_default_str();
      app.add_option("--dtype", args->dtype, "Weight dtypes: f32, bf16, int8")->capture_default_str();
      app.add_option("--json", args->json, "Write the records as a JSON list to FILE");
      app.add_option("--min-seconds", args->min_seconds, "Timed seconds per kernel (after warm-up)")
          ->capture_default_str();
      app.add_flag("--no-baselines", args->no_baselines, "Only nmkit's kernels");
      app.add_flag("--own-kernels", args->own_kernels,
                   "Also time nmkit's own kernels where the plan runs oneDNN (the plan's measurement)");
      return [args]() -> int {
        bench::LinearBenchOptions options;
        options.shapes.clear();
        for (const auto& set : split_list(args->shapes)) {
          using Shapes = std::vector<std::pair<int64_t, int64_t>>;
          const Shapes llama8b{{4096, 4096}, {14336, 4096}};
          const Shapes smollm2{{576, 576}, {192, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
          const Shapes seven_b{{4096, 4096}, {11008, 4096}, {4096, 11008}};
          const Shapes* chosen = set == "llama8b" ? &llama8b : set == "smollm2" ? &smollm2 : set == "7b" ? &seven_b : nullptr;
          if (chosen == nullptr) {
            std::fprintf(stderr, "nmkit bench linear: --shapes '%s' is not llama8b, smollm2 or 7b\n", set.c_str());
            return 2;
          }
          for (const auto& shape : *chosen) {
            if (std::find(options.shapes.begin(), options.shapes.end(), shape) == options.shapes.end()) {
              options.shapes.push_back(shape);
            }
          }
        }
        if (args->rows > 0 || args->K > 0) {
          const int64_t K = args->K > 0 ? args->K : 4096;
          options.shapes.clear();
          if (args->rows > 0) options.shapes.emplace_back(args->rows, K);
          else options.shapes = {{4096, K}, {14336, K}};
        }
        if (!parse_positive_list(args->m, "--m", options.Ms)) return 2;
        options.patterns.clear();
        for (const auto& p : split_list(args->pattern)) {
          auto pattern = Pattern::parse(p);
          if (!pattern.ok()) {
            std::fprintf(stderr, "nmkit bench linear: %s\n", pattern.error().message().c_str());
            return 2;
          }
          options.patterns.push_back(*pattern);
        }
        options.dtypes = split_list(args->dtype);
        for (const auto& d : options.dtypes) {
          if (d != "f32" && d != "bf16" && d != "int8") {
            std::fprintf(stderr, "nmkit bench linear: --dtype '%s' is not f32, bf16 or int8\n", d.c_str());
            return 2;
          }
        }
        auto tier = active_tier();
        if (!tier.ok()) {
          std::fprintf(stderr, "nmkit bench linear: %s\n", tier.error().message().c_str());
          return 2;
        }
        options.json_path = args->json;
        options.min_seconds = args->min_seconds;
        options.baselines = !args->no_baselines;
        options.own_kernels = args->own_kernels;
        if (options.baselines) reexec_without_openblas_overrides();
        return bench::run_linear_bench(options);
      };
    },
});

}  // namespace
}  // namespace nmkit::cli
