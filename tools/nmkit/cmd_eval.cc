// `nmkit eval MODEL --text FILE`: perplexity by llama.cpp's protocol (docs/design.md 11.4).
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/nmkit/calib_cli.h"  // --method wanda|sparsegpt|admm: calibrated pruning on load
#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "nmkit/files.h"
#include "nmkit/perplexity.h"
#include "tools/nmkit/memory.h"
#include "tools/nmkit/model_cli.h"
#include "nmkit/text_file.h"

namespace nmkit::cli {
namespace {

const bool eval_registered = register_command({
    "eval",
    "Perplexity of a llama model on a text (llama.cpp's protocol), in any weight form",
    30,
    [](CLI::App& app) -> std::function<int()> {
      struct Args {
        std::string model, text, json;
        int64_t ctx = 512, chunks = 0;
        WeightFlags weights;
        CalibFlags calib;
      };
      auto args = std::make_shared<Args>();
      app.add_option("MODEL", args->model, "GGUF file or Hugging Face model directory")->required();
      app.add_option("--text", args->text, "UTF-8 text file to evaluate on")->required();
      app.add_option("--ctx", args->ctx, "Tokens per chunk")->capture_default_str();
      app.add_option("--chunks", args->chunks, "At most this many chunks (0: all)")->capture_default_str();
      app.add_option("--json", args->json, "Write the result as JSON to FILE");
      add_weight_flags(app, args->weights);
      add_calib_flags(app, args->calib);
      app.add_flag("--permute-inputs", args->calib.permute_inputs,
                   "A measurement (docs/design.md 12.2 (c)): also reorder each block's q/k/v and gate/up inputs "
                   "before pruning, then put the columns back, so the model computes with the masks that order "
                   "gives (N:M only in the searched order: dense --format only)");
      return [args]() -> int {
        // wanda, sparsegpt and admm prune after the build, calibrated block by block (calib_cli.h).
        WeightFlags flags = args->weights;
        std::optional<CalibMethod> calibrated;
        // magnitude with --permute, --swaps or --refit: the calibrator's too
        if (flags.method != "magnitude" || args->calib.permute || args->calib.swaps || args->calib.refit > 0 ||
            args->calib.dense_targets > 0 ||
            args->calib.permute_inputs) {
          if (auto m = parse_calib_method(flags.method); m.ok()) {
            calibrated = *m;
            flags.method = "magnitude";
          }
        }
        auto options = model_options(flags);
        if (!options.ok()) return report_error(options.error());
        std::optional<Pattern> calib_pattern;
        auto calib_format = options->format;
        if (calibrated) {
          if (!options->pattern) return report_error("--method " + args->weights.method + " needs --pattern");
          calib_pattern = options->pattern;
          options->pattern.reset();
          options->format = decltype(options->format)::Dense;
          options->keep_dense_weights = true;
        }
        if (args->ctx < 4) return report_error("--ctx " + std::to_string(args->ctx) + " is below 4");
        if (args->chunks < 0) return report_error("--chunks " + std::to_string(args->chunks) + " is negative");
        auto text = TextFile::open("--text", args->text);
        if (!text.ok()) return report_error(text.error());
        // Its first MiB now: a binary file fails before the model loads.
        if (Status st = text->read_at_least(size_t{1} << 20); !st.ok()) return report_error(st.error());
        auto source = open_model(args->model);
        if (!source.ok()) return report_error(source.error());
        if (args->ctx > source->params.n_ctx_train) {
          return report_error(fmt::format("--ctx {} exceeds the context length {} of {}", args->ctx,
                                          source->params.n_ctx_train, args->model));
        }
        auto tokenizer = require_tokenizer(*source);
        if (!tokenizer.ok()) return report_error(tokenizer.error());
        std::optional<PendingFile> json_file;
        if (!args->json.empty()) {  // created now, so an unwritable path fails before the long work
          auto distinct = check_distinct_files({{"--json", args->json}}, {{"MODEL", args->model}, {"--text", args->text}});
          if (!distinct.ok()) return report_error(distinct.error());
          auto f = PendingFile::create(args->json);
          if (!f.ok()) return report_error(f.error());
          json_file.emplace(std::move(f.value()));
        }
        // --chunks N needs N x ctx tokens: only a prefix of a long text is read and tokenized.
        Result<TextTokens> text_tokens = Error("");
        {
          MemoryActivity activity("reading and tokenizing " + args->text);
          text_tokens = tokenize_text(*text, **tokenizer, static_cast<size_t>(args->chunks * args->ctx));
        }
        if (!text_tokens.ok()) return report_error(text_tokens.error());
        const std::vector<int32_t>& tokens = text_tokens->ids;
        if (static_cast<int64_t>(tokens.size()) < 2 * args->ctx) {
          return report_error(fmt::format("{}: {} tokens, fewer than 2 x ctx = {}", args->text, tokens.size(),
                                          2 * args->ctx));
        }
        auto model = build_model(*source, *options, args->ctx);
        if (!model.ok()) return report_error(model.error());
        if (calibrated) {
          auto run = calibrate_model(*model, tokenizer->get(), *calib_pattern, *calibrated, args->calib, calib_format);
          if (!run.ok()) return report_error(run.error());
          std::fprintf(stderr, "%s\n", calib_summary(*run, *calib_pattern, *calibrated).c_str());
          options->pattern = calib_pattern;
          options->format = calib_format;
        }
        PerplexityOptions po;
        po.ctx = args->ctx;
        po.max_chunks = args->chunks;
        po.add_bos = (*tokenizer)->add_bos();
        po.bos = (*tokenizer)->bos();
        Progress progress("eval");
        po.on_chunk = [&progress](int64_t c, int64_t n, double ppl) {
          progress.update(static_cast<size_t>(c + 1), static_cast<size_t>(n), fmt::format("perplexity {:.4f}", ppl));
        };
        MemoryActivity activity("evaluating " + args->model);
        auto result = perplexity(*model, tokens, po);
        progress.clear();
        if (!result.ok()) return report_error(result.error().with_context(args->model + ": "));
        const double tps = static_cast<double>(result->tokens) / result->seconds;
        fmt::print("{} ({}) on {}: perplexity {:.4f}\n", args->model, describe(*options), args->text, result->perplexity);
        const std::string tokenized =
            text_tokens->whole ? fmt::format("{} text tokens", tokens.size())
                               : fmt::format("{} tokens of the text's first {} bytes (as many as --chunks {} needs)",
                                             tokens.size(), text_tokens->tokenized_bytes, args->chunks);
        fmt::print("{}, {} chunks of {} ({} tokens run, {} predictions), {:.1f} s, {:.1f} tokens/s\n", tokenized,
                   result->chunks, args->ctx, result->tokens, result->predictions, result->seconds, tps);
        if (json_file) {
          nlohmann::json j = {{"model", args->model},           {"text", args->text},
                              {"weights", describe(*options)},  {"ctx", args->ctx},
                              {"text_tokens", tokens.size()},  {"chunks", result->chunks},
                              {"text_bytes_tokenized", text_tokens->tokenized_bytes},
                              {"text_tokenized_whole", text_tokens->whole},
                              {"tokens", result->tokens},       {"predictions", result->predictions},
                              {"perplexity", result->perplexity}, {"nll_sum", result->nll_sum},
                              {"seconds", result->seconds},     {"tokens_per_second", tps},
                              {"weight_bytes_per_token", model->weight_bytes_per_token()},
                              {"resident_bytes", model->resident_bytes()},
                              {"kv_cache_bytes", LlamaSession::cache_bytes(model->params(), args->ctx)}};
          auto st = json_file->append(j.dump(1) + "\n");
          if (st.ok()) st = json_file->commit();
          if (!st.ok()) return report_error(st.error());
        }
        return 0;
      };
    },
});

}  // namespace
}  // namespace nmkit::cli
