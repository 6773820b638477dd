// nmkit quantize ACT -o OUT --dtype int8|e4m3 [--lift 6:8 --align 32]: per-token dynamic quantization
// of every 2-D float tensor NAME of a safetensors file (docs/design.md section 6), optionally fused with
// SlideSparse lifting (section 5). Writes NAME.codes (I8, or the e4m3 bytes as U8) and NAME.scales
// (F32, one per row): what a GPU pipeline's quantization kernel should produce for these activations.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "nmkit/files.h"
#include "nmkit/quant.h"
#include "nmkit/safetensors.h"
#include "nmkit/slide_geometry.h"

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

// One tensor: quantized by the fill of NAME.codes, its scales kept for the fill of NAME.scales.
struct QuantItem {
  std::string name;
  TensorView x;
  std::optional<SlideGeometry> geometry;
  int64_t cols = 0;
  Tensor scales;
  float scale_min = 0, scale_max = 0;
};

int run(const QuantizeArgs& args) {
  const auto type = quant_type_from_name(args.dtype);
  if (!type) return report_error(fmt::format("--dtype '{}': expected int8 or e4m3", args.dtype));
  std::optional<Pattern> pattern;
  if (!args.lift.empty()) {
    auto parsed = Pattern::parse(args.lift);
    if (!parsed.ok()) return report_error(parsed.error().with_context("--lift: "));
    if (auto probe = SlideGeometry::make(*parsed, 1, args.align); !probe.ok()) {
      return report_error(probe.error().with_context(fmt::format("--lift {} --align {}: ", args.lift, args.align)));
    }
    pattern = *parsed;
  } else if (args.align_given) {
    return report_error("--align: only meaningful with --lift");
  }
  if (auto distinct = check_distinct_files({{"-o", args.output}}, {{"input", args.input}}); !distinct.ok()) {
    return report_error(distinct.error());
  }

  auto file = SafetensorsFile::open(args.input);
  if (!file.ok()) return report_error(file.error());

  std::vector<std::unique_ptr<QuantItem>> items;
  std::vector<OutputTensor> outputs;
  std::vector<std::string> skipped;
  for (const TensorInfo& info : file->tensors()) {
    if (info.shape.size() != 2 || !is_prunable(info.dtype) || info.shape[1] < 1) {
      skipped.push_back(info.name);
      continue;
    }
    auto item = std::make_unique<QuantItem>();
    item->name = info.name;
    item->x = file->view(info);
    item->cols = info.shape[1];
    if (pattern) {
      auto geometry = SlideGeometry::make(*pattern, info.shape[1], args.align);
      if (!geometry.ok()) return report_error(geometry.error().with_context(args.input + ": tensor " + quote_name(info.name) + ": "));
      item->geometry = *geometry;
      item->cols = geometry->K_prime();
    }
    QuantItem* raw = item.get();
    const std::string input = args.input;
    const DType code_dtype = *type == QuantType::Int8 ? DType::I8 : DType::U8;  // e4m3 bytes as U8
    outputs.push_back(OutputTensor{info.name + ".codes", code_dtype, {info.shape[0], item->cols},
                                   [raw, input, type](std::byte* dst) -> Status {
                                     raw->scales = Tensor::empty(DType::F32, {raw->x.rows()});
                                     Status status = quantize_tokens_into(
                                         raw->x, *type, raw->geometry ? &*raw->geometry : nullptr, dst, raw->cols,
                                         raw->scales.as<float>(), raw->name);
                                     if (!status.ok()) return status.error().with_context(input + ": ");
                                     return ok_status();
                                   }});
    outputs.push_back(OutputTensor{info.name + ".scales", DType::F32, {info.shape[0]},
                                   [raw](std::byte* dst) -> Status {
                                     std::memcpy(dst, raw->scales.data(), raw->scales.nbytes());
                                     const float* s = raw->scales.as<float>();
                                     const int64_t n = raw->scales.numel();
                                     if (n > 0) {
                                       raw->scale_min = *std::min_element(s, s + n);
                                       raw->scale_max = *std::max_element(s, s + n);
                                     }
                                     raw->scales = Tensor();
                                     return ok_status();
                                   }});
    items.push_back(std::move(item));
  }
  if (items.empty()) {
    return report_error(fmt::format("{}: no 2-D F32/F16/BF16 tensor to quantize", args.input));
  }
  std::set<std::string> seen;
  for (const auto& out : outputs) {
    if (!seen.insert(out.name).second) {
      return report_error(fmt::format("{}: tensor {}: the output would hold two tensors of this name",
                                      args.input, quote_name(out.name)));
    }
  }

  nlohmann::json record{{"dtype", quant_type_name(*type)},
                        {"codes_dtype", *type == QuantType::Int8 ? "I8" : "U8 (e4m3fn bytes)"},
                        {"rule", *type == QuantType::Int8
                                     ? "q = clamp(rne(x * (127/absmax)), -127, 127), scale = absmax/127"
                                     : "q = e4m3_rne_satfinite(x * (448/absmax)), scale = absmax/448"}};
  if (pattern) {
    record["lift"] = pattern->str();
    record["align"] = args.align;
  }
  // Not under "nmkit.": a JSON object there is a weight record (include/nmkit/checkpoint.h), and
  // readers would refuse this one as a malformed record of a weight named "quantize".
  Metadata metadata{{"nmkit-quantize", record.dump()}};

  Status written = write_safetensors(args.output, outputs, metadata);
  if (!written.ok()) return report_error(written.error());

  Table table({"tensor", "shape", "codes", "scale min", "scale max"});
  for (const auto& item : items) {
    table.add_row({item->name, shape_str(item->x.shape), shape_str({item->x.rows(), item->cols}),
                   short_float(item->scale_min), short_float(item->scale_max)});
  }
  fmt::print("{}", table.render());
  fmt::print("quantized {} tensors to {} per token{}; skipped {} (not 2-D float); wrote {}\n", items.size(),
             quant_type_name(*type), pattern ? fmt::format(", lifted for {} (align {})", pattern->str(), args.align) : "",
             skipped.size(), args.output);
  return 0;
}

const bool registered = register_command(CommandSpec{
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
