// nmkit slide IN -o OUT --pattern 6:8 [--align 32] [--format dense|sparse24|cutlass_sm80]: rewrites
// every selected keep:2N-compliant weight as its SlideSparse 2:4 form [rows, K'] (docs/design.md
// section 5), records the geometry in __metadata__ and prints K, K', expansion and the ideal speedup
// N/(N-1) per tensor.
#include <memory>
#include <string>
#include <fmt/core.h>

#include "nmkit/checkpoint.h"
#include "nmkit/files.h"
#include "nmkit/slide_checkpoint.h"
#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"

namespace nmkit::cli {
namespace {

struct SlideArgs {
  std::string input;
  std::string output;
  std::string pattern;
  int align = 32;
  std::string format = "dense";
  std::string include;
  std::string exclude = kDefaultExclude;
};

int run(const SlideArgs& args) {
  auto pattern = Pattern::parse(args.pattern);
  if (!pattern.ok()) return report_error(pattern.error().with_context("--pattern: "));
  // Checks the pattern and the alignment before any file is opened.
  if (auto probe = SlideGeometry::make(*pattern, 1, args.align); !probe.ok()) {
    return report_error(probe.error().with_context(fmt::format("--pattern {} --align {}: ", args.pattern, args.align)));
  }
  auto format = parse_stored_format(args.format);
  if (!format.ok()) return report_error(format.error().with_context("--format: "));
  if (format->format == WeightFormat::NM) {
    return report_error("--format nm: a slid weight is 2:4; use dense, sparse24 or cutlass_sm80");
  }
  if (auto distinct = check_distinct_files({{"-o", args.output}}, {{"input", args.input}}); !distinct.ok()) {
    return report_error(distinct.error());
  }
  auto filter = NameFilter::make(args.include, args.exclude);
  if (!filter.ok()) return report_error(filter.error());

  SlideCheckpointJob job;
  job.input = args.input;
  job.output = args.output;
  job.pattern = *pattern;
  job.align = args.align;
  job.format = format->format;
  job.layout = format->layout;
  job.selected = filter->predicate();
  job.noncompliant_hint =
      fmt::format("run `nmkit prune {} -o PRUNED.safetensors --pattern {}` first", args.input, args.pattern);
  Progress progress("sliding");
  job.on_tensor = progress.tensor_callback();
  auto outcome = slide_checkpoint(job);
  progress.clear();
  if (!outcome.ok()) return report_error(outcome.error());

  Table table({"tensor", "shape", "K", "K'", "expansion", "ideal speedup"});
  for (const SlidTensor& t : outcome->tensors) {
    const SlideGeometry& g = t.geometry;
    table.add_row({t.name, shape_str({t.rows, g.K}), std::to_string(g.K), std::to_string(g.K_prime()),
                   fmt::format("{:.4f}", static_cast<double>(g.K_prime()) / static_cast<double>(g.K)),
                   fmt::format("{:.4f}", g.ideal_speedup())});
  }
  fmt::print("{}", table.render());
  fmt::print("slid {} tensors from {} onto 2:4 windows (N {}, window 4, stride 2, align {}, format {}), copied {} "
             "unchanged; wrote {}\n",
             outcome->tensors.size(), pattern->str(), pattern->N(), args.align, stored_format_name(*format),
             outcome->copied_tensors, args.output);
  if (outcome->tensors.empty()) {
    fmt::print("note: no tensor was selected (2-D F32/F16/BF16 not already slid, --include '{}', --exclude '{}')\n",
               args.include, args.exclude);
  }
  return 0;
}

const bool slide_registered = register_command(CommandSpec{
    "slide",
    "Slide keep:2N weights (6:8, 4:6, 8:10, ...) onto 2:4 windows for 2:4 sparse GEMMs (SlideSparse)",
    20,
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<SlideArgs>();
      app.add_option("input", args->input, "Input checkpoint (.safetensors), pruned to --pattern")->required();
      app.add_option("-o,--output", args->output, "Output checkpoint (written atomically)")->required();
      app.add_option("--pattern", args->pattern, "keep:2N pattern the weights comply with, keep <= 2N-2 (6:8, 4:6, "
                                                 "8:10, 14:16, ...)")
          ->required();
      app.add_option("--align", args->align, "K' is rounded up to a multiple of this (a multiple of 4; 32 suits "
                                             "cuSPARSELt's 8-bit types, 16 its 16-bit ones)")
          ->capture_default_str();
      app.add_option("--format", args->format,
                     "dense (masked [rows, K']) | sparse24 (NAME.values + NAME.meta) | cutlass_sm80 (sparse24 in "
                     "CUTLASS's SM80 layout, F16/BF16)")
          ->capture_default_str();
      app.add_option("--include", args->include, "Slide only names where this regex is found (default: all)");
      app.add_option("--exclude", args->exclude, "Never slide names where this regex is found")->capture_default_str();
      return [args] { return run(*args); };
    },
});

}  // namespace
}  // namespace nmkit::cli
