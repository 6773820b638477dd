// `nmkit bench model MODEL`: decode and prefill tokens/s in every weight form, next to llama.cpp.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "tools/nmkit/model_cli.h"

#include "model_bench.h"

namespace nmkit::cli {
namespace {

namespace fs = std::filesystem;

// llama.cpp's files of the same model, as scripts/bench_models.sh leaves them in the model's folder
// or the one above it (.cache/models/): *.F32.gguf, *.BF16.gguf, *.Q8_0.gguf.
std::vector<bench::LlamaCppFile> find_llamacpp_files(const std::string& model_path) {
  std::vector<bench::LlamaCppFile> files;
  fs::path dir = fs::path(model_path).parent_path();
  if (dir.empty()) dir = ".";
  for (const char* label : {"F32", "BF16", "Q8_0"}) {
    bool found = false;
    for (const fs::path& d : {dir, dir.parent_path()}) {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(d.empty() ? fs::path(".") : d, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.ends_with(std::string(".") + label + ".gguf")) {
          files.push_back({label, entry.path().string()});
          found = true;
          break;
        }
      }
      if (found) break;
    }
  }
  return files;
}

const bool registered = register_command({
    "bench model",
    "A llama model's decode and prefill tokens/s in f32/bf16/int8, dense, 2:4 and 6:8, next to llama.cpp",
    52,
    [](CLI::App& app) -> std::function<int()> {
      struct Args {
        std::string model, json, llama_bench = ".cache/llamacpp/build/bin/llama-bench";
        int rounds = 3;
        int64_t decode = 128, prefill = 512;
        bool no_llamacpp = false;
        bool one_at_a_time = false;
        std::vector<std::string> variants;
      };
      auto args = std::make_shared<Args>();
      app.add_option("MODEL", args->model, "GGUF file or Hugging Face model directory")->required();
      app.add_option("--json", args->json, "Write the records as a JSON list to FILE");
      app.add_option("--rounds", args->rounds, "Interleaved rounds (medians over them)")->capture_default_str();
      app.add_option("--decode", args->decode, "Tokens generated per decode timing")->capture_default_str();
      app.add_option("--prefill", args->prefill, "Prompt tokens per prefill timing")->capture_default_str();
      app.add_option("--llama-bench", args->llama_bench, "llama.cpp's llama-bench (skipped when absent)")
          ->capture_default_str();
      app.add_flag("--no-llamacpp", args->no_llamacpp, "Only nmkit");
      app.add_flag("--one-at-a-time", args->one_at_a_time,
                   "Build, time and free each form before the next (load time and peak RSS per form); "
                   "the default when the forms do not fit in memory together");
      app.add_option("--variants", args->variants,
                     "Only these weight forms, comma-separated labels or dtypes (\"int8\", \"f32 dense\", "
                     "\"bf16 2:4 sparse24\"); default all nine")
          ->delimiter(',');
      return [args]() -> int {
        if (args->rounds < 1 || args->decode < 1 || args->prefill < 1) {
          return report_error("--rounds, --decode and --prefill must be positive");
        }
        auto opened = open_model(args->model);
        if (!opened.ok()) return report_error(opened.error());
        auto source = std::make_shared<OpenedModel>(std::move(opened.value()));
        bench::ModelBenchOptions o;
        o.model_label = args->model;
        o.build = [source](const ModelOptions& options) { return LlamaModel::build(source->params, source->tensors, options); };
        if (!args->variants.empty()) {
          std::vector<bench::ModelVariant> chosen;
          for (const auto& v : o.variants) {
            for (const auto& want : args->variants) {
              if (v.label == want || v.label.starts_with(want + " ")) {
                chosen.push_back(v);
                break;
              }
            }
          }
          if (chosen.empty()) return report_error("--variants matches none of the nine weight forms");
          o.variants = std::move(chosen);
        }
        o.one_at_a_time = args->one_at_a_time || !bench::forms_fit_at_once(source->params, o.variants);
        o.rounds = args->rounds;
        o.decode_tokens = args->decode;
        o.prefill_tokens = args->prefill;
        if (args->prefill > source->params.n_ctx_train) {
          return report_error("--prefill " + std::to_string(args->prefill) + " exceeds the model's context length " +
                              std::to_string(source->params.n_ctx_train));
        }
        if (!args->no_llamacpp && fs::exists(args->llama_bench)) {
          o.llama_bench = args->llama_bench;
          o.llamacpp_files = find_llamacpp_files(args->model);
        }
        o.json_path = args->json;
        return bench::run_model_bench(o);
      };
    },
});

}  // namespace
}  // namespace nmkit::cli
