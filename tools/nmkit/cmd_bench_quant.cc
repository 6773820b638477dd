// `nmkit bench quant`: fused quantize+lift vs plain per-token quantization (issue 3).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "nmkit/pattern.h"
#include "nmkit/quant.h"

#include "quant_bench.h"

namespace nmkit::cli {
namespace {

const bool bench_quant_registered = register_command({
    "bench quant",
    "Fused quantize+lift vs plain per-token quantization (INT8, FP8) with the copy bandwidth",
    51,
    [](CLI::App& app) -> std::function<int()> {
      struct Args {
        std::string m = "1,16,256,4096", k = "4096,11008", dtype = "int8,e4m3", pattern = "2:4,4:6,6:8,8:10";
        int align = 32;
        double min_seconds = 0.3;
        std::string json;
        bool stream = false;
      };
      auto args = std::make_shared<Args>();
      app.add_option("--m", args->m, "Tokens, comma-separated")->capture_default_str();
      app.add_option("--k", args->k, "Input features, comma-separated")->capture_default_str();
      app.add_option("--dtype", args->dtype, "int8, e4m3")->capture_default_str();
      app.add_option("--pattern", args->pattern, "keep:2N patterns to lift for")->capture_default_str();
      app.add_option("--align", args->align, "K' alignment")->capture_default_str();
      app.add_option("--min-seconds", args->min_seconds, "Timed seconds per kernel (after warm-up)")
          ->capture_default_str();
      app.add_option("--json", args->json, "Write the records as a JSON list to FILE");
      app.add_flag("--stream", args->stream, "Write the codes with non-temporal stores");
      return [args]() -> int {
        bench::QuantBenchOptions options;
        if (!parse_positive_list(args->m, "--m", options.Ms)) return 2;
        if (!parse_positive_list(args->k, "--k", options.Ks)) return 2;
        options.types.clear();
        for (const auto& d : split_list(args->dtype)) {
          const auto type = quant_type_from_name(d);
          if (!type.ok()) {
            std::fprintf(stderr, "nmkit: --dtype: %s\n", type.error().message().c_str());
            return 2;
          }
          options.types.push_back(*type);
        }
        options.patterns.clear();
        for (const auto& p : split_list(args->pattern)) {
          auto pattern = Pattern::parse(p);
          if (!pattern.ok() || !pattern->slidable()) {
            std::fprintf(stderr, "nmkit: --pattern '%s' is not a slidable keep:2N pattern\n", p.c_str());
            return 2;
          }
          options.patterns.push_back(*pattern);
        }
        if (args->align < 4 || args->align % 4 != 0) {
          std::fprintf(stderr, "nmkit: --align %d is not a positive multiple of 4\n", args->align);
          return 2;
        }
        options.align = args->align;
        options.min_seconds = args->min_seconds;
        options.json_path = args->json;
        options.stream = args->stream;
        return bench::run_quant_bench(options);
      };
    },
});

}  // namespace
}  // namespace nmkit::cli
