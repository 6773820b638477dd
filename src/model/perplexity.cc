#include "nmkit/perplexity.h"

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "model/model_kernels.h"
#include "nmkit/threads.h"

namespace nmkit {

double negative_log_likelihood(const float* logits, int64_t n_vocab, int32_t target) {
  float max = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) max = logits[i] > max ? logits[i] : max;
  // e^(l - max) in f32 blocks (relative error < 2e-7 each, model_kernels.h), summed in float64.
  constexpr int64_t kBlock = 1024;
  float e[kBlock];
  double sum = 0;
  for (int64_t i0 = 0; i0 < n_vocab; i0 += kBlock) {
    const int64_t m = std::min(kBlock, n_vocab - i0);
    for (int64_t i = 0; i < m; ++i) e[i] = logits[i0 + i] - max;
    model::exp_inplace(e, m);
    for (int64_t i = 0; i < m; ++i) sum += e[i];
  }
  return std::log(sum) + static_cast<double>(max) - static_cast<double>(logits[target]);
}

Result<PerplexityResult> perplexity(const LlamaModel& model, const std::vector<int32_t>& tokens,
                                    const PerplexityOptions& options) {
  const int64_t ctx = options.ctx;
  const LlamaParams& p = model.params();
  if (ctx < 4) return Error(ErrorCode::InvalidArgument, "perplexity: ctx " + std::to_string(ctx) + " is below 4");
  if (ctx > p.n_ctx_train) {
    return Error(ErrorCode::InvalidArgument, "perplexity: ctx " + std::to_string(ctx) + " exceeds the model's context length " +
                 std::to_string(p.n_ctx_train));
  }
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < 2 * ctx) {
    return Error(ErrorCode::InvalidArgument, "perplexity: the text has " + std::to_string(n_tokens) + " tokens, fewer than 2 x ctx = " +
                 std::to_string(2 * ctx));
  }
  int64_t n_chunks = n_tokens / ctx;
  if (options.max_chunks > 0) n_chunks = std::min(n_chunks, options.max_chunks);
  const int64_t first = ctx / 2;
  const int64_t rows = ctx - first;  // logits of positions first .. ctx-1; the last predicts nothing
  LlamaSession session(model, ctx);
  std::vector<float> logits(static_cast<size_t>(rows * p.n_vocab));
  std::vector<int32_t> chunk(static_cast<size_t>(ctx));
  std::vector<double> nll(static_cast<size_t>(rows));
  PerplexityResult result;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::copy(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx, chunk.begin());
    if (options.add_bos) chunk[0] = options.bos;
    session.reset();
    NMKIT_TRY(model.forward(session, chunk.data(), ctx, logits.data(), first));
    // Row r (position first + r) predicts the text's token at first + r + 1 (not the BOS-replaced one).
    parallel_for(rows - 1, 8, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        nll[static_cast<size_t>(r)] = negative_log_likelihood(
            logits.data() + r * p.n_vocab, p.n_vocab, tokens[static_cast<size_t>(c * ctx + first + r + 1)]);
      }
    });
    for (int64_t r = 0; r < rows - 1; ++r) result.nll_sum += nll[static_cast<size_t>(r)];
    result.predictions += rows - 1;
    result.chunks = c + 1;
    NMKIT_TRY(invoke_callback(options.on_chunk, "perplexity progress", c, n_chunks,
                              std::exp(result.nll_sum / static_cast<double>(result.predictions))));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.tokens = n_chunks * ctx;
  result.perplexity = std::exp(result.nll_sum / static_cast<double>(result.predictions));
  return result;
}

}  // namespace nmkit
