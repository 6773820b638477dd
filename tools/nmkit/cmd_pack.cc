// nmkit pack MODEL -o OUT.gguf --weights W [--pattern P --format F]: the model built in a weight
// form (pruned, quantized and packed on load, as every model command builds it) and written as a
// packed model file (docs/design.md 11.9), which every model command then loads by mapping it: the
// linears run in place from the file, nothing converted, as llama.cpp runs a quantized file.
#include <memory>
#include <string>

#include <fmt/core.h>

#include "nmkit/model_source.h"
#include "nmkit/model_write.h"
#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "tools/nmkit/memory.h"
#include "tools/nmkit/model_cli.h"

namespace nmkit::cli {
namespace {

struct PackArgs {
  std::string input, output;
  WeightFlags weights;
};

int run(const PackArgs& args) {
  auto options = model_options(args.weights);
  if (!options.ok()) return report_error(options.error());
  auto opened = open_model(args.input);
  if (!opened.ok()) return report_error(opened.error());
  auto source = std::static_pointer_cast<const ModelSource>(opened->keep_alive);
  if (Status st = check_packed_model_output(args.output, options->weights, *source, "-o"); !st.ok()) {
    return report_error(st.error());
  }
  auto model = build_model(*opened, *options);
  if (!model.ok()) return report_error(model.error());
  {
    MemoryActivity activity("writing " + args.output);
    Progress progress("writing");
    ModelWriteOptions write;
    if (progress.enabled()) write.on_tensor = [&](size_t i, size_t n, const OutputTensor& t) { progress.update(i, n, t.name); };
    if (Status st = write_packed_model(args.output, *model, *source, write); !st.ok()) return report_error(st.error());
    progress.clear();
  }
  fmt::print("wrote {} ({}, {} of packed weights)\n", args.output, describe(model->options()),
             human_bytes(static_cast<double>(model->storage_bytes())));
  return 0;
}

const bool pack_registered = register_command(CommandSpec{
    "pack",
    "Write a model in a weight form as a packed model file that loads without converting",
    12,
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<PackArgs>();
      app.add_option("input", args->input, "A model: GGUF file or Hugging Face folder")->required();
      app.add_option("-o,--output", args->output, "The packed model file, OUT.gguf (written atomically; only nmkit "
                     "reads it: every model command loads it as its form)")->required();
      add_weight_flags(app, args->weights);
      return [args] { return run(*args); };
    },
});

}  // namespace
}  // namespace nmkit::cli
