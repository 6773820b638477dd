// The llama forward pass (docs/design.md 11.2) over the packed SparseLinears: batched prefill, one-token
// decode against the KV cache, and block-by-block runs without a cache for calibration. A block is
// its attention (attention.h) then its feed-forward (feed_forward.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "model/attention.h"
#include "model/family.h"
#include "model/feed_forward.h"
#include "model/forward_common.h"
#include "model/kv_cache.h"

namespace nmkit {
namespace model {
namespace {

Status run_block(const LlamaModel::Impl& m, int64_t b, Scratch& s, int64_t n, const Positions& at, const KvLayer& kv,
                 const LinearHook* hook) {
  const Block& block = m.blocks[static_cast<size_t>(b)];
  NMKIT_TRY(attention(m, block, b, s, n, at, kv, hook));
  return feed_forward(m, block, b, s, n, hook);
}

Status check_tokens(const LlamaParams& p, const int32_t* tokens, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= p.n_vocab) {
      return Error("model: token " + std::to_string(i) + " has id " + std::to_string(tokens[i]) +
                   ", outside the vocabulary of " + std::to_string(p.n_vocab));
    }
  }
  return ok_status();
}

// The embedding rows, times sqrt(n_embd) in families that scale them (Gemma: llama.cpp's ggml_scale by
// sqrtf(n_embd)).
void embed_rows(const LlamaModel::Impl& m, const int32_t* tokens, int64_t n, float* hidden) {
  m.token_embd.rows(tokens, n, hidden);
  if (!m.family->embed_scale) return;
  const float scale = std::sqrt(static_cast<float>(m.params.n_embd));
  for (int64_t i = 0; i < n * m.params.n_embd; ++i) hidden[i] *= scale;
}

}  // namespace
}  // namespace model

struct LlamaSession::Impl {
  const LlamaModel::Impl* model = nullptr;
  model::KvCache cache;
  int64_t pos = 0;
  model::Scratch scratch;
};

namespace {
model::KvCache make_cache_or_throw(const LlamaParams& p, int64_t n_ctx) {
  auto cache = model::KvCache::make(p, n_ctx);
  if (!cache.ok()) throw std::bad_alloc();
  return std::move(*cache);
}
}  // namespace

LlamaSession::LlamaSession(const LlamaModel& model, int64_t n_ctx)
    : impl_(new Impl{model.impl_.get(), make_cache_or_throw(model.params(), n_ctx), 0, {}}) {}
LlamaSession::LlamaSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Result<LlamaSession> LlamaSession::create(const LlamaModel& model, int64_t n_ctx) {
  auto cache = model::KvCache::make(model.params(), n_ctx);
  if (!cache.ok()) return cache.error();
  return LlamaSession(std::unique_ptr<Impl>(new Impl{model.impl_.get(), std::move(*cache), 0, {}}));
}
LlamaSession::LlamaSession(LlamaSession&&) noexcept = default;
LlamaSession& LlamaSession::operator=(LlamaSession&&) noexcept = default;
LlamaSession::~LlamaSession() = default;
int64_t LlamaSession::n_ctx() const { return impl_->cache.n_ctx(); }
int64_t LlamaSession::position() const { return impl_->pos; }
void LlamaSession::reset() { impl_->pos = 0; }
size_t LlamaSession::cache_bytes(const LlamaParams& params, int64_t n_ctx) {
  return model::KvCache::bytes(params, n_ctx);
}

Status LlamaModel::forward(LlamaSession& session, const int32_t* tokens, int64_t n, float* logits,
                           int64_t logits_from) const {
  LlamaSession::Impl& st = *session.impl_;
  const LlamaParams& p = impl_->params;
  if (st.model != impl_.get()) return Error("model: the session was made for another model");
  if (n < 1) return Error("model: forward of " + std::to_string(n) + " tokens");
  if (logits_from < 0 || logits_from > n) {
    return Error("model: logits_from " + std::to_string(logits_from) + " is outside 0.." + std::to_string(n));
  }
  if (st.pos + n > st.cache.n_ctx()) {
    return Error("model: " + std::to_string(st.pos) + " cached + " + std::to_string(n) +
                 " new tokens exceed the context of " + std::to_string(st.cache.n_ctx()));
  }
  NMKIT_TRY(model::check_tokens(p, tokens, n));
  model::Scratch& s = st.scratch;
  s.reserve(p, n);
  const model::Positions at{st.pos, 0};
  model::embed_rows(*impl_, tokens, n, s.x.data());
  model::compute_angles(p, n, at, s);
  for (int64_t b = 0; b < p.n_layer; ++b) NMKIT_TRY(model::run_block(*impl_, b, s, n, at, st.cache.layer(b), nullptr));
  st.pos += n;
  const int64_t rows = n - logits_from;
  if (rows == 0) return ok_status();
  const int64_t d = p.n_embd;
  model::norm_rows(s.x.data() + logits_from * d, impl_->output_norm, rows, d, p.rms_eps, s.xn.data());
  return impl_->head->apply(s.xn.data(), rows, logits);
}

Status LlamaModel::embed(const int32_t* tokens, int64_t n, float* hidden) const {
  if (n < 0) return Error("model: embed of " + std::to_string(n) + " tokens");
  NMKIT_TRY(model::check_tokens(impl_->params, tokens, n));
  model::embed_rows(*impl_, tokens, n, hidden);
  return ok_status();
}

Status LlamaModel::run_block(int64_t b, float* hidden, int64_t n_seq, int64_t seq_len,
                             const LinearHook& hook) const {
  const LlamaParams& p = impl_->params;
  if (b < 0 || b >= p.n_layer) {
    return Error("model: block " + std::to_string(b) + " is outside 0.." + std::to_string(p.n_layer - 1));
  }
  if (n_seq < 1 || seq_len < 1) {
    return Error("model: run_block of " + std::to_string(n_seq) + " sequences of " + std::to_string(seq_len) +
                 " tokens");
  }
  // docs/design.md 12: the sequences run in groups of at most kBlockGroupTokens tokens (at least one
  // sequence), so the scratch and the group's cache stay bounded however many sequences calibrate
  // (64 x 256 tokens at 1B shape held 1.8 GB of scratch in one call); the hook sees each group's
  // inputs in order.
  const int64_t group = std::clamp<int64_t>(kBlockGroupTokens / seq_len, 1, n_seq);
  const int64_t n = group * seq_len, d = p.n_embd;
  model::Scratch s;
  s.reserve(p, n);
  const model::Positions at{0, seq_len};
  model::compute_angles(p, n, at, s);  // every group starts a sequence: the same positions
  const size_t floats = static_cast<size_t>(p.n_head_kv * p.head_dim() * n);
  std::vector<float> k(floats), v(floats);  // one layer's cache, as long as the call
  const model::KvLayer kv{k.data(), v.data(), n};
  for (int64_t first = 0; first < n_seq; first += group) {
    const int64_t tokens = std::min(group, n_seq - first) * seq_len;
    float* rows = hidden + first * seq_len * d;
    std::memcpy(s.x.data(), rows, static_cast<size_t>(tokens * d) * sizeof(float));
    NMKIT_TRY(model::run_block(*impl_, b, s, tokens, at, kv, &hook));
    std::memcpy(rows, s.x.data(), static_cast<size_t>(tokens * d) * sizeof(float));
  }
  return ok_status();
}

Status LlamaModel::head(const float* hidden, int64_t n, float* logits) const {
  if (n < 0) return Error("model: head of " + std::to_string(n) + " tokens");
  const int64_t d = impl_->params.n_embd;
  std::vector<float> normed(static_cast<size_t>(n * d));
  model::norm_rows(hidden, impl_->output_norm, n, d, impl_->params.rms_eps, normed.data());
  return impl_->head->apply(normed.data(), n, logits);
}

}  // namespace nmkit
