// Text generation (include/nmkit/generate.h).
#include "nmkit/generate.h"

#include <algorithm>
#include <chrono>
#include <span>

#include "core/stopwatch.h"

namespace nmkit {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Result<std::vector<int32_t>> prompt_tokens(const Tokenizer& tokenizer, std::string_view prompt, bool chat,
                                           int64_t n_ctx) {
  if (auto bad = first_invalid_utf8(prompt)) {
    return Error(ErrorCode::InvalidArgument, "prompt is not UTF-8 text (invalid byte at offset " +
                                                 std::to_string(*bad) + ")");
  }
  std::string text(prompt);
  if (chat) {
    const std::vector<ChatMessage> messages = {{"user", text}};
    auto rendered = apply_chat_template(tokenizer.chat_template(), messages, true);
    if (!rendered.ok()) return rendered.error();
    text = *rendered;
  }
  auto ids = tokenizer.encode(text, tokenizer.add_bos(), chat);
  if (!ids.ok()) return ids.error();
  const auto n = static_cast<int64_t>(ids->size());
  if (n < 1) return Error(ErrorCode::InvalidArgument, "prompt gives no tokens");
  if (n >= n_ctx) {
    return Error(ErrorCode::InvalidArgument, "prompt has " + std::to_string(n) +
                                                 " tokens, more than the context length " + std::to_string(n_ctx) +
                                                 " allows");
  }
  return ids;
}

Result<GenerateResult> generate(const LlamaModel& model, const Tokenizer& tokenizer,
                                const std::vector<int32_t>& prompt, const GenerateOptions& options) {
  if (options.max_tokens < 1) {
    return Error(ErrorCode::InvalidArgument, "max_tokens " + std::to_string(options.max_tokens) + " is not positive");
  }
  auto sampler = Sampler::create(options.sampling);
  if (!sampler.ok()) return sampler.error();
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  const int64_t n_ctx = model.params().n_ctx_train;
  if (n_prompt < 1 || n_prompt >= n_ctx) {
    return Error(ErrorCode::InvalidArgument, "prompt of " + std::to_string(n_prompt) +
                                                 " tokens: expected 1 to " + std::to_string(n_ctx - 1));
  }
  const int64_t n_gen = std::min(options.max_tokens, n_ctx - n_prompt);
  LlamaSession session(model, n_prompt + n_gen);
  std::vector<float> logits(static_cast<size_t>(model.params().n_vocab));
  // Only ids the tokenizer can print: a model's vocabulary may be padded beyond the tokenizer's
  // (load_tokenizer refuses one smaller than it; issue 24, item 7).
  const std::span<const float> printable(logits.data(), std::min(logits.size(), static_cast<size_t>(tokenizer.n_vocab())));
  GenerateResult result;
  const auto t0 = Clock::now();
  NMKIT_TRY(model.forward(session, prompt.data(), n_prompt, logits.data(), n_prompt - 1));
  result.prefill_seconds = seconds_since(t0);
  const auto t1 = Clock::now();
  for (;;) {
    auto next = sampler->sample(printable);
    if (!next.ok()) return next.error();
    if (tokenizer.is_eog(*next)) break;
    const std::string piece = tokenizer.token_to_piece(*next);
    result.text += piece;
    result.tokens.push_back(*next);
    NMKIT_TRY(invoke_callback(options.on_piece, "generation callback", std::string_view(piece)));
    if (static_cast<int64_t>(result.tokens.size()) >= n_gen) break;
    int32_t id = *next;
    NMKIT_TRY(model.forward(session, &id, 1, logits.data(), 0));
    ++result.decoded;
  }
  result.decode_seconds = seconds_since(t1);
  return result;
}

}  // namespace nmkit
