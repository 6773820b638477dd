// nmkit inspect FILE [--json]: dtype, shape, zero fraction and the sparsest N:M pattern of every tensor
// (compressed weights are recognised from nmkit's records and reported by their logical shape).
#include <memory>
#include <string>
#include <fmt/core.h>

#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "tools/nmkit/inspect_logic.h"

namespace nmkit::cli {
namespace {

struct InspectArgs {
  std::string path;
  bool json = false;
};

int run(const InspectArgs& args) {
  auto tensors = inspect_path(args.path);
  if (!tensors.ok()) return report_error(tensors.error());
  if (args.json) {
    fmt::print("{}\n", inspect_json(args.path, *tensors));
    return 0;
  }
  fmt::print("{}\n", args.path);
  fmt::print("{}", inspect_table(*tensors));
  size_t checked = 0, with_pattern = 0;
  for (const auto& t : *tensors) {
    checked += t.checked;
    with_pattern += t.sparsest.has_value();
  }
  fmt::print("{} tensors; {} 2-D float tensors, {} of them comply with an N:M pattern of ", tensors->size(), checked,
             with_pattern);
  const auto& candidates = inspect_candidates();
  for (size_t i = 0; i < candidates.size(); ++i) fmt::print("{}{}", i ? ", " : "{", candidates[i].str());
  fmt::print("}}\n");
  return 0;
}

const bool inspect_registered = register_command(CommandSpec{
    "inspect",
    "Show dtype, shape, zero fraction and sparsest N:M pattern of every tensor in a checkpoint",
    20,
    [](CLI::App& app) -> std::function<int()> {
      auto args = std::make_shared<InspectArgs>();
      app.add_option("file", args->path, "Checkpoint (.safetensors or .gguf), or a Hugging Face model folder")->required();
      app.add_flag("--json", args->json, "Print JSON instead of a table");
      return [args] { return run(*args); };
    },
});

}  // namespace
}  // namespace nmkit::cli
