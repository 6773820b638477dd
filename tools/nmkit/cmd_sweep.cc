// `nmkit sweep MODEL --text FILE`: the model pruned (magnitude, on load) to several N:M patterns next
// to the dense model, in one table: perplexity, size of the weights in their format, decode and
// prefill tokens/s, each against dense. `make run` runs it on SmolLM2.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "nmkit/files.h"
#include "tools/nmkit/model_cli.h"
#include "nmkit/perplexity.h"

#include "measure.h"
#include "model_bench.h"

namespace nmkit::cli {
namespace {

struct Row {
  std::string pattern, format;
  ModelOptions options;
  std::unique_ptr<LlamaModel> model;
  PerplexityResult ppl;
  std::vector<double> decode, prefill;
};

const bool sweep_registered = register_command({
    "sweep",
    "Prune a llama model to several N:M patterns on load: perplexity, size, decode and prefill speed vs dense (make run)",
    32,
    [](CLI::App& app) -> std::function<int()> {
      struct Args {
        std::string model, text, json, patterns = "6:8,4:8,2:4", weights = "f32";
        int64_t ctx = 512, chunks = 8, decode = 64, prefill = 512;
        int rounds = 3;
      };
      auto args = std::make_shared<Args>();
      app.add_option("MODEL", args->model, "GGUF file or Hugging Face model directory")->required();
      app.add_option("--text", args->text, "UTF-8 text for the perplexity")->required();
      app.add_option("--patterns", args->patterns, "Patterns, comma-separated (2:4 runs as sparse24, others as nm; "
                     "slid with --weights int8)")->capture_default_str();
      app.add_option("--weights", args->weights, "f32, bf16 or int8")->capture_default_str();
      app.add_option("--ctx", args->ctx, "Perplexity context")->capture_default_str();
      app.add_option("--chunks", args->chunks, "Perplexity chunks (0: the whole text)")->capture_default_str();
      app.add_option("--decode", args->decode, "Tokens per decode timing")->capture_default_str();
      app.add_option("--prefill", args->prefill, "Tokens per prefill timing")->capture_default_str();
      app.add_option("--rounds", args->rounds, "Interleaved timing rounds (medians)")->capture_default_str();
      app.add_option("--json", args->json, "Write the rows as JSON to FILE");
      return [args]() -> int {
        auto weights = parse_weight_dtype(args->weights);
        if (!weights.ok()) return report_error("--" + weights.error().message());
        if (args->rounds < 1 || args->decode < 1 || args->prefill < 1 || args->ctx < 4 || args->chunks < 0) {
          return report_error("--rounds, --decode, --prefill must be positive, --ctx at least 4, --chunks >= 0");
        }
        std::vector<Row> rows(1);
        rows[0].pattern = "dense";
        rows[0].options.weights = *weights;
        for (const auto& item : split_list(args->patterns)) {
          auto pattern = Pattern::parse(item);
          if (!pattern.ok()) return report_error("--patterns: " + pattern.error().message());
          Row row;
          row.pattern = pattern->str();
          row.options.weights = *weights;
          row.options.pattern = *pattern;
          row.options.format = *pattern == Pattern{2, 4} ? LinearFormat::Sparse24
                               : *weights == DType::I8  ? LinearFormat::Slid
                                                        : LinearFormat::NM;
          rows.push_back(std::move(row));
        }
        std::ifstream in(args->text, std::ios::binary);
        if (!in) return report_error(args->text + ": cannot open");
        std::stringstream ss;
        ss << in.rdbuf();
        const std::string text = ss.str();
        if (auto bad = first_invalid_utf8(text)) {
          return report_error(fmt::format("{}: not UTF-8 text (invalid byte at offset {})", args->text, *bad));
        }
        auto source = open_model(args->model);
        if (!source.ok()) return report_error(source.error());
        if (args->ctx > source->params.n_ctx_train || args->prefill > source->params.n_ctx_train) {
          return report_error(fmt::format("--ctx {} / --prefill {} exceed the context length {} of {}", args->ctx,
                                          args->prefill, source->params.n_ctx_train, args->model));
        }
        auto tokenizer = require_tokenizer(*source);
        if (!tokenizer.ok()) return report_error(tokenizer.error());
        std::optional<PendingFile> json_file;
        if (!args->json.empty()) {
          auto distinct = check_distinct_files({{"--json", args->json}}, {{"MODEL", args->model}, {"--text", args->text}});
          if (!distinct.ok()) return report_error(distinct.error());
          auto f = PendingFile::create(args->json);
          if (!f.ok()) return report_error(f.error());
          json_file.emplace(std::move(f.value()));
        }
        auto tokens = (*tokenizer)->encode(text, (*tokenizer)->add_bos(), false);
        if (!tokens.ok()) return report_error(tokens.error().with_context(args->text + ": "));
        if (static_cast<int64_t>(tokens->size()) < 2 * args->ctx) {
          return report_error(fmt::format("{}: {} tokens, fewer than 2 x ctx = {}", args->text, tokens->size(),
                                          2 * args->ctx));
        }
        PerplexityOptions po;
        po.ctx = args->ctx;
        po.max_chunks = args->chunks;
        po.add_bos = (*tokenizer)->add_bos();
        po.bos = (*tokenizer)->bos();
        for (auto& row : rows) {
          auto model = build_model(*source, row.options);
          if (!model.ok()) return report_error(model.error());
          row.model = std::make_unique<LlamaModel>(std::move(model.value()));
          row.format = std::string(row.options.weights == DType::F32    ? "f32"
                                   : row.options.weights == DType::BF16 ? "bf16"
                                                                        : "int8") +
                       " " + std::string(linear_format_name(row.options.format));
          Progress progress("perplexity " + row.pattern + " " + row.format);
          po.on_chunk = [&progress](int64_t c, int64_t n, double ppl) {
            progress.update(static_cast<size_t>(c + 1), static_cast<size_t>(n), fmt::format("{:.3f}", ppl));
          };
          auto ppl = perplexity(*row.model, *tokens, po);
          if (!ppl.ok()) return report_error(ppl.error());
          row.ppl = *ppl;
        }
        // Timings in interleaved rounds (every row once per round; medians and same-round ratios).
        const int64_t ctx = std::max(args->prefill, 8 + args->decode);
        {
          Progress progress("timing");
          for (int r = 0; r < args->rounds; ++r) {
            for (size_t i = 0; i < rows.size(); ++i) {
              progress.update(static_cast<size_t>(r) * rows.size() + i + 1, rows.size() * static_cast<size_t>(args->rounds),
                              rows[i].format);
              LlamaSession session(*rows[i].model, ctx);
              if (r == 0) {  // untimed: first calls build lazily made forms
                auto warm = bench::measure_decode(*rows[i].model, session, 8, 2);
                if (warm.ok()) warm = bench::measure_prefill(*rows[i].model, session, std::min<int64_t>(64, args->prefill));
                if (!warm.ok()) return report_error(warm.error());
              }
              auto dec = bench::measure_decode(*rows[i].model, session, 8, args->decode);
              if (!dec.ok()) return report_error(dec.error());
              auto pre = bench::measure_prefill(*rows[i].model, session, args->prefill);
              if (!pre.ok()) return report_error(pre.error());
              rows[i].decode.push_back(*dec);
              rows[i].prefill.push_back(*pre);
            }
          }
        }
        auto ratio = [](const std::vector<double>& a, const std::vector<double>& b) {
          std::vector<double> r;
          for (size_t i = 0; i < a.size(); ++i) r.push_back(a[i] / b[i]);
          return bench::median_of(r);
        };
        const Row& base = rows[0];
        fmt::print("{} on {} ({} text tokens; perplexity over {} chunks of {}, {} predictions each model); "
                   "decode {} tokens, prefill {}; {} rounds, medians\n",
                   args->model, args->text, tokens->size(), base.ppl.chunks, args->ctx, base.ppl.predictions,
                   args->decode, args->prefill, args->rounds);
        Table table({"pattern", "weights format", "perplexity", "vs dense", "size MB", "vs dense", "decode tok/s",
                     "vs dense", "prefill tok/s", "vs dense"});
        nlohmann::json records = nlohmann::json::array();
        for (const auto& row : rows) {
          const double size = static_cast<double>(row.model->storage_bytes());
          const double base_size = static_cast<double>(base.model->storage_bytes());
          table.add_row({row.pattern, row.format, fmt::format("{:.3f}", row.ppl.perplexity),
                         fmt::format("{:+.1f}%", 100.0 * (row.ppl.perplexity / base.ppl.perplexity - 1.0)),
                         fmt::format("{:.1f}", size / 1e6), fmt::format("{:.2f}x", size / base_size),
                         fmt::format("{:.1f}", bench::median_of(row.decode)),
                         fmt::format("{:.2f}x", ratio(row.decode, base.decode)),
                         fmt::format("{:.1f}", bench::median_of(row.prefill)),
                         fmt::format("{:.2f}x", ratio(row.prefill, base.prefill))});
          records.push_back({{"pattern", row.pattern}, {"format", row.format}, {"perplexity", row.ppl.perplexity},
                             {"chunks", row.ppl.chunks}, {"predictions", row.ppl.predictions},
                             {"storage_bytes", size}, {"decode_tps", row.decode}, {"prefill_tps", row.prefill},
                             {"eval_seconds", row.ppl.seconds}});
        }
        std::fputs(table.render().c_str(), stdout);
        if (json_file) {
          auto st = json_file->append(records.dump(1) + "\n");
          if (st.ok()) st = json_file->commit();
          if (!st.ok()) return report_error(st.error());
        }
        return 0;
      };
    },
});

}  // namespace
}  // namespace nmkit::cli
