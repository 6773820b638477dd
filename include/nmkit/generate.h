// Text generation with a llama model: the prompt's tokens, one prefill pass, then a token at a time
// from the sampler until an end-of-generation token, n tokens, or the context is full. What
// `nmkit generate` prints and Python's Model.generate returns.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/model.h"
#include "nmkit/sampler.h"
#include "nmkit/status.h"
#include "nmkit/tokenizer.h"

namespace nmkit {

// The prompt as generate() runs it: with `chat`, wrapped in the tokenizer's chat template as one user
// turn (ready for the assistant's reply); encoded with the tokenizer's BOS rule (special tokens
// parsed only in the chat form). Errors: text that is not UTF-8, a prompt without tokens, and one of
// n_ctx tokens or more (no room to generate).
Result<std::vector<int32_t>> prompt_tokens(const Tokenizer& tokenizer, std::string_view prompt, bool chat,
                                           int64_t n_ctx);

struct GenerateOptions {
  int64_t max_tokens = 64;   // at most this many tokens (also bounded by the context length)
  SamplerParams sampling;    // greedy by default
  // Called with the bytes of each generated token as soon as it is sampled (may end inside a UTF-8
  // character; the concatenation is the text).
  std::function<void(std::string_view piece)> on_piece;
};

struct GenerateResult {
  std::string text;             // the generated pieces, without the prompt
  std::vector<int32_t> tokens;  // their ids (an end-of-generation token is not included)
  double prefill_seconds = 0;   // the prompt's forward pass
  double decode_seconds = 0;    // the one-token passes after it
  int64_t decoded = 0;          // one-token forward passes timed by decode_seconds
};

// Generates from `prompt` (prompt_tokens' ids). Errors: max_tokens < 1, sampler parameters out of
// range, and those of the forward pass.
Result<GenerateResult> generate(const LlamaModel& model, const Tokenizer& tokenizer,
                                const std::vector<int32_t>& prompt, const GenerateOptions& options);

}  // namespace nmkit
