// nmkit quantize ACT -o OUT --dtype int8|e4m3 [--lift 6:8 --align 32]: per-token dynamic quantization
// of every 2-D float tensor NAME of a safetensors file (docs/design.md section 6), optionally fused with
// SlideSparse lifting (section 5). Writes NAME.codes (I8, or the e4m3 bytes as U8) and NAME.scales
// (F32, one per row): what a GPU pipeline's quantization kernel should produce for these activations.
#include <memory>
#include <string>
#include <fmt/core.h>

#include "nmkit/files.h"
#include "nmkit/quant.h"
#include "nmkit/quantize_checkpoint.h"
#include "nmkit/slide_geometry.h"
#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"

namespace nmkit::cli {
namespace {

struct QuantizeArgs {
  std::string input;
  std::string output;
  std::string dtype;
  std::string lift;
  int align = 32;
  bool align_given = false;
};

int run(const QuantizeArgs& args) {
  const auto type = quant_type_from_name(args.dtype);
  if (!type.ok()) return report_error(type.error().with_context("--dtype: "));
  QuantizeCheckpointJob job;
  job.input = args.input;
  job.output = args.output;
  job.type = *type;
  job.align = args.align;
  if (!args.lift.empty()) {
    auto parsed = Pattern::parse(args.lift);
    if (!parsed.ok()) return report_error(parsed.error().with_context("--lift: "));
    if (auto probe = SlideGeometry::make(*parsed, 1, args.align); !probe.ok()) {
      return report_error(probe.error().with_context(fmt::format("--lift {} --align {}: ", args.lift, args.align)));
    }
    job.lift = *parsed;
  } else if (args.align_given) {
    return report_error("--align: only meaningful with --lift");
  }
  if (auto distinct = check_distinct_files({{"-o", args.output}}, {{"input", args.input}}); !distinct.ok()) {
    return report_error(distinct.error());
  }
  Progress progress("quantizing");
  job.on_tensor = progress.tensor_callback();
  auto outcome = quantize_checkpoint(job);
  progress.clear();
  if (!outcome.ok()) return report_error(outcome.error());

  Table table({"tensor", "shape", "codes", "scale min", "scale max"});
  for (const QuantizedTensor& t : outcome->tensors) {
    table.add_row({t.name, shape_str(t.shape), shape_str({t.shape[0], t.cols}), short_float(t.scale_min),
                   short_float(t.scale_max)});
  }
  fmt::print("{}", table.render());
  fmt::print("quantized {} tensors to {} per token{}; skipped {} (not 2-D float); wrote {}\n", outcome->tensors.size(),
             quant_type_name(job.type),
             job.lift ? fmt::format(", lifted for {} (align {})", job.lift->str(), args.align) : "",
             outcome->skipped_tensors, args.output);
  return 0;
}

const bool quantize_registered = register_command(CommandSpec{
    "quantize",
    "Quantize activations per token to INT8 or FP8 E4M3, optionally lifted for a slid weight",
    25,
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<QuantizeArgs>();
      app.add_option("input", args->input, "Activations (.safetensors): every 2-D F32/F16/BF16 tensor [M, K]")
          ->required();
      app.add_option("-o,--output", args->output, "Output: NAME.codes and NAME.scales per tensor")->required();
      app.add_option("--dtype", args->dtype, "int8 | e4m3")->required();
      app.add_option("--lift", args->lift, "Lift to K' for weights slid from this keep:2N pattern (e.g. 6:8)");
      auto* align = app.add_option("--align", args->align, "K' alignment of the lifted codes (with --lift)")
                        ->capture_default_str();
      return [args, align] {
        args->align_given = align->count() > 0;
        return run(*args);
      };
    },
});

}  // namespace
}  // namespace nmkit::cli
