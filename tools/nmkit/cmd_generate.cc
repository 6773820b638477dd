// `nmkit generate MODEL --prompt TEXT`: text from a llama model on stdout (greedy by default), then
// the speed on stderr.
#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "tools/nmkit/memory.h"
#include "tools/nmkit/model_cli.h"
#include "nmkit/sampler.h"

namespace nmkit::cli {
namespace {

using Clock = std::chrono::steady_clock;

const bool registered = register_command({
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
        auto sampler = Sampler::create(args->sampling);
        if (!sampler.ok()) return report_error(sampler.error());
        if (first_invalid_utf8(args->prompt)) return report_error("--prompt is not UTF-8 text");
        auto source = open_model(args->model);
        if (!source.ok()) return report_error(source.error());
        auto tokenizer_result = require_tokenizer(*source);
        if (!tokenizer_result.ok()) return report_error(tokenizer_result.error());
        const Tokenizer& tokenizer = **tokenizer_result;
        std::string text = args->prompt;
        if (args->chat) {
          const std::vector<ChatMessage> messages = {{"user", args->prompt}};
          auto rendered = apply_chat_template(tokenizer.chat_template(), messages, true);
          if (!rendered.ok()) return report_error(rendered.error().with_context(args->model + ": "));
          text = *rendered;
        }
        auto ids = tokenizer.encode(text, tokenizer.add_bos(), args->chat);
        if (!ids.ok()) return report_error(ids.error());
        const int64_t n_prompt = static_cast<int64_t>(ids->size());
        const int64_t n_ctx = source->params.n_ctx_train;
        if (n_prompt < 1) return report_error("--prompt gives no tokens");
        if (n_prompt >= n_ctx) {
          return report_error(fmt::format("--prompt has {} tokens, more than the context length {} of {} allows",
                                          n_prompt, n_ctx, args->model));
        }
        const int64_t n_gen = std::min(args->n, n_ctx - n_prompt);
        auto model = build_model(*source, *options, n_prompt + n_gen);
        if (!model.ok()) return report_error(model.error());
        LlamaSession session(*model, n_prompt + n_gen);
        const int64_t V = model->params().n_vocab;
        std::vector<float> logits(static_cast<size_t>(V));
        // Only ids the tokenizer can print: a model's vocabulary may be padded beyond it (check_vocabulary).
        const std::span<const float> printable(logits.data(), static_cast<size_t>(tokenizer.n_vocab()));
        MemoryActivity activity("generating with " + args->model);
        const auto t0 = Clock::now();
        Status st = model->forward(session, ids->data(), n_prompt, logits.data(), n_prompt - 1);
        if (!st.ok()) return report_error(st.error());
        const double prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
        std::fputs(args->prompt.c_str(), stdout);
        std::fflush(stdout);
        int64_t generated = 0, decoded = 0;  // tokens printed; one-token forward passes timed
        const auto t1 = Clock::now();
        for (;;) {
          auto next = sampler->sample(printable);
          if (!next.ok()) return report_error(next.error());
          if (tokenizer.is_eog(*next)) break;
          const std::string piece = tokenizer.token_to_piece(*next);
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
          if (++generated >= n_gen) break;
          int32_t id = *next;
          st = model->forward(session, &id, 1, logits.data(), 0);
          if (!st.ok()) return report_error(st.error());
          ++decoded;
        }
        const double decode_s = std::chrono::duration<double>(Clock::now() - t1).count();
        // stdout holds the text alone (a script pipes it on); the timing is a report, on stderr.
        std::fputs("\n", stdout);
        std::fflush(stdout);
        fmt::print(stderr, "prefill {} tokens, {:.1f} tokens/s; decode {} tokens, {:.1f} tokens/s ({})\n", n_prompt,
                   static_cast<double>(n_prompt) / prefill_s, generated,
                   decoded > 0 ? static_cast<double>(decoded) / decode_s : 0.0, describe(*options));
        return 0;
      };
    },
});

}  // namespace
}  // namespace nmkit::cli
