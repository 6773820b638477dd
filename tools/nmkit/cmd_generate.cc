// `nmkit generate MODEL --prompt TEXT`: text from a llama model on stdout (greedy by default), then
// the speed on stderr.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "tools/nmkit/memory.h"
#include "tools/nmkit/model_cli.h"
#include "nmkit/generate.h"

namespace nmkit::cli {
namespace {

const bool generate_registered = register_command({
    "generate",
    "Generate text with a llama model (greedy by default; --chat applies its chat template)",
    31,
    [](CLI::App& app) -> std::function<int()> {
      struct Args {
        std::string model, prompt;
        int64_t n = 64;
        SamplerParams sampling;
        bool chat = false;
        WeightFlags weights;
      };
      auto args = std::make_shared<Args>();
      app.add_option("MODEL", args->model, "GGUF file or Hugging Face model directory")->required();
      app.add_option("--prompt", args->prompt, "The prompt text")->required();
      app.add_option("-n", args->n, "Tokens to generate at most")->capture_default_str();
      app.add_option("--temp", args->sampling.temperature, "Temperature (0: greedy)")->capture_default_str();
      app.add_option("--top-k", args->sampling.top_k, "Sample from the k most likely tokens (0: all)")
          ->capture_default_str();
      app.add_option("--top-p", args->sampling.top_p, "Nucleus sampling threshold")->capture_default_str();
      app.add_option("--seed", args->sampling.seed, "Random seed of the sampler")->capture_default_str();
      app.add_flag("--chat", args->chat, "Wrap the prompt in the model's chat template (one user turn)");
      add_weight_flags(app, args->weights);
      return [args]() -> int {
        auto options = model_options(args->weights);
        if (!options.ok()) return report_error(options.error());
        if (args->n < 1) return report_error("-n " + std::to_string(args->n) + " is not positive");
        if (auto sampler = Sampler::create(args->sampling); !sampler.ok()) return report_error(sampler.error());
        auto source = open_model(args->model);
        if (!source.ok()) return report_error(source.error());
        auto tokenizer_result = require_tokenizer(*source);
        if (!tokenizer_result.ok()) return report_error(tokenizer_result.error());
        const Tokenizer& tokenizer = **tokenizer_result;
        // Before the model is built: a prompt that cannot run fails fast.
        auto ids = prompt_tokens(tokenizer, args->prompt, args->chat, source->params.n_ctx_train);
        if (!ids.ok()) {  // the prompt's own faults read "--prompt ...", the chat template's name the model
          const Error& e = ids.error();
          return report_error(e.code() == ErrorCode::InvalidArgument ? e.with_context("--")
                                                                     : e.with_context(args->model + ": "));
        }
        auto model = build_model(*source, *options, std::min(static_cast<int64_t>(ids->size()) + args->n, source->params.n_ctx_train));
        if (!model.ok()) return report_error(model.error());
        GenerateOptions go;
        go.max_tokens = args->n;
        go.sampling = args->sampling;
        go.on_piece = [](std::string_view piece) {
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
        };
        std::fputs(args->prompt.c_str(), stdout);
        std::fflush(stdout);
        MemoryActivity activity("generating with " + args->model);
        auto run = generate(*model, tokenizer, *ids, go);
        if (!run.ok()) return report_error(run.error());
        // stdout holds the text alone (a script pipes it on); the timing is a report, on stderr.
        std::fputs("\n", stdout);
        std::fflush(stdout);
        fmt::print(stderr, "prefill {} tokens, {:.1f} tokens/s; decode {} tokens, {:.1f} tokens/s ({})\n", ids->size(),
                   static_cast<double>(ids->size()) / run->prefill_seconds, run->tokens.size(),
                   run->decoded > 0 ? static_cast<double>(run->decoded) / run->decode_seconds : 0.0,
                   describe(*options));
        return 0;
      };
    },
});

}  // namespace
}  // namespace nmkit::cli
