// `nmkit bench linear`: nmkit's linear kernels next to OpenBLAS, oneDNN and Eigen in one run.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
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

const bool registered = register_command({
    "bench linear",
    "Dense and sparse linear layers: nmkit vs OpenBLAS, oneDNN and Eigen CSR on LLM layer shapes",
    50,
    [](CLI::App& app) -> std::function<int()> {
      struct Args {
        int64_t rows = 0, K = 0;
        std::string m = "1,16,256", pattern = "2:4,6:8", dtype = "f32,bf16,int8", json;
        double min_seconds = 0.2;
        bool no_baselines = false;
      };
      auto args = std::make_shared<Args>();
      app.add_option("--rows", args->rows, "Output features (default: 4096 and 14336)");
      app.add_option("--k", args->K, "Input features (default: 4096)");
      app.add_option("--m", args->m, "Tokens per call, comma-separated")->capture_default_str();
      app.add_option("--pattern", args->pattern, "Patterns, comma-separated (2:4 runs as sparse24, others as nm)")
          ->capture_default_str();
      app.add_option("--dtype", args->dtype, "Weight dtypes: f32, bf16, int8")->capture_default_str();
      app.add_option("--json", args->json, "Write the records as a JSON list to FILE");
      app.add_option("--min-seconds", args->min_seconds, "Timed seconds per kernel (after warm-up)")
          ->capture_default_str();
      app.add_flag("--no-baselines", args->no_baselines, "Only nmkit's kernels");
      return [args]() -> int {
        bench::LinearBenchOptions options;
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
        if (options.baselines) reexec_without_openblas_overrides();
        return bench::run_linear_bench(options);
      };
    },
});

}  // namespace
}  // namespace nmkit::cli
