// `nmkit linear W.safetensors X.safetensors -o Y.safetensors`: Y = X * W^T with the weight in whatever
// form the file holds it (dense, sparse24, nm, slid) on the fastest kernel of this machine.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "nmkit/checkpoint.h"
#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "nmkit/files.h"
#include "nmkit/format.h"
#include "nmkit/linear.h"
#include "nmkit/safetensors.h"

namespace nmkit::cli {
namespace {

struct LinearArgs {
  std::string weight_path, input_path, output_path;
  std::string weight_name, input_name, output_name = "y";
  bool int8 = false;
};

// The logical tensor NAME, or the only 2-D one when NAME is empty.
Result<const StoredTensor*> pick(const std::vector<StoredTensor>& stored, const std::string& name,
                                 const std::string& path, const char* option) {
  const StoredTensor* found = nullptr;
  int candidates = 0;
  for (const auto& t : stored) {
    if (!name.empty()) {
      if (t.name == name) return &t;
      continue;
    }
    const bool two_d = t.record ? t.record->shape.size() == 2 : t.parts.size() == 1 && t.parts[0]->shape.size() == 2;
    if (two_d) {
      found = &t;
      ++candidates;
    }
  }
  if (!name.empty()) return Error(path + ": no tensor " + quote_name(name));
  if (candidates != 1) {
    return Error(path + ": " + std::to_string(candidates) + " 2-D tensors; choose one with " + option);
  }
  return found;
}

Result<SparseLinear> build_layer(const SafetensorsFile& file, const StoredTensor& stored, bool int8) {
  auto loaded = load_weight(file, stored);
  if (!loaded.ok()) return loaded.error();
  LinearOptions options;
  options.int8 = int8;
  if (stored.record && stored.record->slide) {
    // A slid weight runs as INT8 2:4 on activations lifted while they are quantized.
    const SlideGeometry& geometry = *stored.record->slide;
    if (auto* view = std::get_if<TensorView>(&*loaded)) return SparseLinear::slid(*view, geometry, options);
    if (auto* packed = std::get_if<Sparse24>(&*loaded)) {
      const Tensor dense = decompress(*packed);
      return SparseLinear::slid(dense.view(), geometry, options);
    }
    return Error(file.path() + ": slid weight " + quote_name(stored.name) + " is stored as nm; expected dense or sparse24");
  }
  if (auto* view = std::get_if<TensorView>(&*loaded)) return SparseLinear::dense(*view, options);
  if (auto* packed = std::get_if<Sparse24>(&*loaded)) return SparseLinear::sparse24(*packed, options);
  const auto& nm = std::get<NMPacked>(*loaded);
  if (nm.pattern.group <= 16 && !int8) return SparseLinear::nm(nm, options);
  // Groups above 16 (and int8 nm) have no kernel of their own: the dense kernel runs the weight.
  const Tensor dense = decompress(nm);
  return SparseLinear::dense(dense.view(), options);
}

int run(const LinearArgs& args) {
  // Y must replace neither W nor X (issue 13, D2), however the paths are spelled.
  if (auto distinct = check_distinct_files({{"-o", args.output_path}},
                                           {{"weights file", args.weight_path}, {"inputs file", args.input_path}});
      !distinct.ok()) {
    return report_error(distinct.error());
  }
  auto weights = SafetensorsFile::open(args.weight_path);
  if (!weights.ok()) return report_error(weights.error());
  auto stored = list_stored(*weights);
  if (!stored.ok()) return report_error(stored.error());
  auto weight = pick(*stored, args.weight_name, args.weight_path, "--weight");
  if (!weight.ok()) return report_error(weight.error());
  auto layer = build_layer(*weights, **weight, args.int8);
  if (!layer.ok()) return report_error(layer.error().with_context(args.weight_path + ": " + quote_name((*weight)->name) + ": "));

  auto inputs = SafetensorsFile::open(args.input_path);
  if (!inputs.ok()) return report_error(inputs.error());
  auto input_stored = list_stored(*inputs);
  if (!input_stored.ok()) return report_error(input_stored.error());
  auto input = pick(*input_stored, args.input_name, args.input_path, "--input");
  if (!input.ok()) return report_error(input.error());
  if ((*input)->parts.size() != 1) {
    return report_error(args.input_path + ": input " + quote_name((*input)->name) + " is compressed; expected a plain [M, K] tensor");
  }
  const TensorView x = inputs->view(*(*input)->parts[0]);
  if (x.shape.size() != 2 || x.cols() != layer->K()) {
    return report_error(args.input_path + ": input " + quote_name((*input)->name) + " has shape " + shape_str(x.shape) +
                        ", expected [M, " + std::to_string(layer->K()) + "] (K of the weight)");
  }
  const auto start = std::chrono::steady_clock::now();
  auto y = layer->apply(x);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!y.ok()) return report_error(y.error().with_context(args.input_path + ": "));
  std::vector<OutputTensor> out;
  out.push_back(OutputTensor::owning(args.output_name, std::move(*y)));
  if (auto written = write_safetensors(args.output_path, out); !written.ok()) return report_error(written.error());
  std::printf("%s: Y [%lld, %lld] with %s in %.3f ms (%s of weights, byte ratio %.2fx over dense)\n",
              args.output_path.c_str(), static_cast<long long>(x.rows()), static_cast<long long>(layer->rows()),
              layer->kernel_name(x.rows()).c_str(), ms, human_bytes(static_cast<double>(layer->bytes_streamed())).c_str(),
              layer->byte_ratio());
  return 0;
}

const bool linear_registered = register_command(CommandSpec{
    "linear",
    "Y = X * W^T with the weight as stored (dense, sparse24, nm, slid) on this machine's fastest kernel",
    40,
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<LinearArgs>();
      app.add_option("weights", args->weight_path, "Checkpoint holding W (.safetensors)")->required();
      app.add_option("inputs", args->input_path, "File holding X [M, K] (.safetensors)")->required();
      app.add_option("-o,--output", args->output_path, "Output file for Y [M, rows] f32")->required();
      app.add_option("--weight", args->weight_name, "Logical name of W (default: the only 2-D tensor)");
      app.add_option("--input", args->input_name, "Name of X (default: the only 2-D tensor)");
      app.add_option("--output-name", args->output_name, "Name of Y in the output")->capture_default_str();
      app.add_flag("--int8", args->int8, "Quantize W per row and X per token to INT8 (dense and sparse24)");
      return [args]() { return run(*args); };
    },
});

}  // namespace
}  // namespace nmkit::cli
