// Perplexity by llama.cpp's `llama-perplexity` protocol, so figures compare (docs/design.md 11.4).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "nmkit/model.h"
#include "nmkit/status.h"

namespace nmkit {

struct PerplexityOptions {
  int64_t ctx = 512;        // tokens per chunk
  int64_t max_chunks = 0;   // 0: every whole chunk of the text
  // When the tokenizer adds BOS, each chunk's first token is replaced by `bos`.
  bool add_bos = false;
  int32_t bos = -1;
  // Called after each chunk with the perplexity so far (a progress line).
  std::function<void(int64_t chunk, int64_t n_chunks, double perplexity)> on_chunk;
};

struct PerplexityResult {
  double perplexity = 0;
  double nll_sum = 0;          // sum of -log p(next token), float64
  int64_t predictions = 0;     // chunks * (ctx - 1 - ctx/2)
  int64_t chunks = 0;
  int64_t tokens = 0;          // tokens run through the model: chunks * ctx
  double seconds = 0;          // wall time of the forward passes and scoring
};

// floor(tokens / ctx) chunks (at most max_chunks), each from an empty KV cache; positions
// ctx/2 .. ctx-2 of a chunk predict the tokens after them. Errors: fewer than 2 * ctx tokens,
// ctx < 4 or above the model's training context.
Result<PerplexityResult> perplexity(const LlamaModel& model, const std::vector<int32_t>& tokens,
                                    const PerplexityOptions& options);

// -log softmax(logits)[target] of one row of n_vocab logits, in float64 (exponentials in f32).
double negative_log_likelihood(const float* logits, int64_t n_vocab, int32_t target);

}  // namespace nmkit
