// `nmkit bench model MODEL`: decode and prefill tokens/s in every weight form, next to llama.cpp.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nmkit/gguf.h"
#include "nmkit/model_source.h"
#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "tools/nmkit/model_cli.h"

#include "model_bench.h"

namespace nmkit::cli {
namespace {

namespace fs = std::filesystem;

// Whether the GGUF file at `path` is the model being benchmarked: the same architecture and
// hyper-parameters (hence the same tensor names and shapes, which ModelSource checks on open) and
// the same vocabulary. A mismatch is an Error naming the first difference: another model in the
// folder never becomes the baseline (issue 24, item 3).
Result<std::string> same_model_label(const std::string& path, const OpenedModel& model) {
  auto other = ModelSource::open(path);
  if (!other.ok()) return other.error();
  if (other->gguf() == nullptr) return Error(path + ": not a GGUF file (llama-bench reads GGUF)");
  const LlamaParams &a = model.params, &b = other->params();
  const std::pair<const char*, bool> same[] = {
      {"n_vocab", a.n_vocab == b.n_vocab},     {"n_embd", a.n_embd == b.n_embd},
      {"n_layer", a.n_layer == b.n_layer},     {"n_head", a.n_head == b.n_head},
      {"n_head_kv", a.n_head_kv == b.n_head_kv}, {"n_ff", a.n_ff == b.n_ff},
      {"rms_eps", a.rms_eps == b.rms_eps},     {"rope_base", a.rope_base == b.rope_base},
      {"tied output", a.tied_output == b.tied_output}};
  for (const auto& [what, equal] : same) {
    if (!equal) return Error(path + ": not the same model as " + model.path + " (" + what + " differs)");
  }
  if (model.tokenizer) {
    auto tokenizer = Tokenizer::from_gguf(*other->gguf());
    if (!tokenizer.ok() || tokenizer->vocab().tokens != model.tokenizer->vocab().tokens ||
        tokenizer->vocab().merges != model.tokenizer->vocab().merges) {
      return Error(path + ": not the same model as " + model.path + " (the vocabulary differs)");
    }
  }
  // The weights' type names the row: "F32", "BF16", "Q8_0".
  const GgufTensorInfo* q = other->gguf()->find("blk.0.attn_q.weight");
  return std::string(ggml_type_name(q->type));
}

// llama.cpp's files of the same model: those given with --llamacpp-model (a different model is an
// Error), else those scripts/bench_models.sh leaves in the model's folder or the one above it
// (.cache/models/): *.F32.gguf, *.BF16.gguf, *.Q8_0.gguf, each taken only when it is the same model
// (a note on stderr says why another is skipped).
Result<std::vector<bench::LlamaCppFile>> find_llamacpp_files(const OpenedModel& model,
                                                             const std::vector<std::string>& given) {
  std::vector<bench::LlamaCppFile> files;
  for (const std::string& path : given) {
    auto label = same_model_label(path, model);
    if (!label.ok()) return label.error().with_context("--llamacpp-model ");
    files.push_back({*label, path});
  }
  if (!given.empty()) return files;
  fs::path dir = fs::path(model.path).parent_path();
  if (dir.empty()) dir = ".";
  for (const char* type : {"F32", "BF16", "Q8_0"}) {
    bool found = false;
    for (const fs::path& d : {dir, dir.parent_path()}) {
      std::error_code ec;
      std::vector<fs::path> candidates;
      for (const auto& entry : fs::directory_iterator(d.empty() ? fs::path(".") : d, ec)) {
        if (entry.path().filename().string().ends_with(std::string(".") + type + ".gguf")) {
          candidates.push_back(entry.path());
        }
      }
      std::sort(candidates.begin(), candidates.end());
      for (const fs::path& candidate : candidates) {
        auto label = same_model_label(candidate.string(), model);
        if (!label.ok()) {
          std::fprintf(stderr, "nmkit: note: no llama.cpp baseline from %s\n", display_name(label.error().message()).c_str());
          continue;
        }
        files.push_back({*label, candidate.string()});
        found = true;
        break;
      }
      if (found) break;
    }
  }
  return files;
}

const bool bench_model_registered = register_command({
    "bench model",
    "A llama model's decode and prefill tokens/s in f32/bf16/int8, dense, 2:4 and 6:8, next to llama.cpp",
    52,
    [](CLI::App& app) -> std::function<int()> {
      struct Args {
        std::string model, json, llama_bench = ".cache/llamacpp/build/bin/llama-bench";
        std::vector<std::string> llamacpp_models;
        int rounds = 3;
        int64_t decode = 128, prefill = 512;
        bool no_llamacpp = false;
        bool one_at_a_time = false;
        bool together = false;
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
      app.add_option("--llamacpp-model", args->llamacpp_models,
                     "GGUF files of the same model for llama-bench (repeatable; default: *.F32.gguf, *.BF16.gguf, "
                     "*.Q8_0.gguf beside MODEL or one folder up, when they are the same model)");
      app.add_flag("--one-at-a-time", args->one_at_a_time,
                   "Build, time and free each form before the next (load time and peak RSS per form); "
                   "the default when the forms do not fit in memory together");
      app.add_flag("--together", args->together,
                   "Hold every form at once and interleave the rounds even where the estimate (weights at "
                   "their dtype's dense size, half the available memory) says they may not fit: same-moment "
                   "ratios on a shared host")
          ->excludes("--one-at-a-time");
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
        if (source->tensors.packed) {  // a packed model file runs its own form only
          auto form = model_options_for(source->tensors, ModelOptions{});
          if (!form.ok()) return report_error(form.error().with_context(args->model + ": "));
          o.variants = {bench::ModelVariant{weight_form_name(*form) + " packed", *form}};
        }
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
          if (chosen.empty()) {
            return report_error(source->tensors.packed ? "--variants: " + args->model + " is a packed model file of one form, " + o.variants[0].label
                                                       : std::string("--variants matches none of the nine weight forms"));
          }
          o.variants = std::move(chosen);
        }
        o.one_at_a_time =
            args->one_at_a_time || (!args->together && !bench::forms_fit_at_once(source->params, o.variants));
        o.rounds = args->rounds;
        o.decode_tokens = args->decode;
        o.prefill_tokens = args->prefill;
        if (args->prefill > source->params.n_ctx_train) {
          return report_error("--prefill " + std::to_string(args->prefill) + " exceeds the model's context length " +
                              std::to_string(source->params.n_ctx_train));
        }
        if (!args->no_llamacpp && fs::exists(args->llama_bench)) {
          auto files = find_llamacpp_files(*source, args->llamacpp_models);
          if (!files.ok()) return report_error(files.error());
          if (files->empty()) {  // say why the table has no llama.cpp rows
            std::fprintf(stderr,
                         "nmkit: note: no llama.cpp baseline: no *.F32/BF16/Q8_0.gguf of this model beside it or "
                         "in the folder above (scripts/bench_models.sh models makes SmolLM2's; or pass "
                         "--llamacpp-model FILE)\n");
          }
          o.llama_bench = args->llama_bench;
          o.llamacpp_files = std::move(*files);
        } else if (!args->llamacpp_models.empty()) {
          return report_error("--llamacpp-model: " + args->llama_bench + " (--llama-bench) is absent" +
                              (args->no_llamacpp ? " or --no-llamacpp is set" : ""));
        }
        o.json_path = args->json;
        return bench::run_model_bench(o);
      };
    },
});

}  // namespace
}  // namespace nmkit::cli
