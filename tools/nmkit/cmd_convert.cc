// nmkit convert MODEL -o OUT.gguf|DIR/|OUT.safetensors [--dtype f32|f16|bf16]: a model written
// without pruning (issue 24, item 8): a GGUF file as a Hugging Face folder and back, a quantized GGUF
// dequantized to F32/F16/BF16 (the dense baseline next to a pruned model), a Hugging Face folder as a
// GGUF file that llama.cpp's tools load. Tensor by tensor: one tensor in memory at a time.
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

struct ConvertArgs {
  std::string input, output, dtype = "f32";
};

int run(const ConvertArgs& args) {
  auto source = ModelSource::open(args.input);
  if (!source.ok()) return report_error(source.error());
  auto dtype = parse_output_dtype(args.dtype);
  if (!dtype.ok()) return report_error(dtype.error());
  auto output = parse_model_output(args.output, *dtype, *source, "-o");
  if (!output.ok()) return report_error(output.error());
  if (Status st = check_model_output(*output, *source); !st.ok()) return report_error(st.error());
  {
    MemoryActivity activity("writing " + args.output);
    Progress progress("writing");
    std::function<void(size_t, size_t, const OutputTensor&)> on_tensor;
    if (progress.enabled()) on_tensor = [&](size_t i, size_t n, const OutputTensor& t) { progress.update(i, n, t.name); };
    if (Status st = write_model_output(*output, source_tensors(*source), *source, on_tensor); !st.ok()) {
      return report_error(st.error());
    }
    progress.clear();
  }
  fmt::print("wrote {} ({}, {} tensors of {} blocks, {})\n", args.output, args.dtype, source->tensor_names().size(),
             source->params().n_layer,
             human_bytes(static_cast<double>(model_file_bytes(source->params(), output->dtype))));
  if (output->kind == ModelOutput::Kind::Gguf && source->gguf() == nullptr && source->tokenizer_json().empty()) {
    fmt::print(stderr, "nmkit: note: {} has no tokenizer.json, so {} has no tokenizer (llama.cpp needs one)\n",
               args.input, args.output);
  }
  return 0;
}

const bool convert_registered = register_command(CommandSpec{
    "convert",
    "Write a llama model without pruning: GGUF <-> Hugging Face folder, F32/F16/BF16",
    11,
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<ConvertArgs>();
      app.add_option("input", args->input, "A model: GGUF file or Hugging Face folder")->required();
      app.add_option("-o,--output", args->output, "Written atomically: OUT.gguf, a folder DIR/ (Hugging Face "
                     "layout), or from a Hugging Face folder OUT.safetensors (its weights alone)")->required();
      app.add_option("--dtype", args->dtype, "Dtype of the 2-D tensors: f32, f16 or bf16 (norms stay f32)")
          ->capture_default_str();
      return [args] { return run(*args); };
    },
});

}  // namespace
}  // namespace nmkit::cli
