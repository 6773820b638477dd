// The llama forward pass (docs/design.md 11.2) over the packed SparseLinears: batched prefill, one-token
// decode against the KV cache, and block-by-block runs without a cache for calibration.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "model/llama_impl.h"
#include "model/model_kernels.h"
#include "nmkit/threads.h"

namespace nmkit {
namespace model {
namespace {

// Work buffers of a forward call of up to `capacity` tokens; grown (never shrunk) on demand, so a
// decode loop allocates nothing.
struct Scratch {
  int64_t capacity = 0;
  std::vector<float> x, xn, qkv, att, tmp, gate_up, act, cos_sin;

  void reserve(const LlamaParams& p, int64_t n) {
    if (n <= capacity) return;
    const int64_t d = p.n_embd, hd = p.head_dim();
    auto grow = [n](std::vector<float>& v, int64_t width) { v.resize(static_cast<size_t>(n * width)); };
    grow(x, d);
    grow(xn, d);
    grow(qkv, (p.n_head + 2 * p.n_head_kv) * hd);
    grow(att, p.n_head * hd);
    grow(tmp, d);
    grow(gate_up, 2 * p.n_ff);
    grow(act, p.n_ff);
    grow(cos_sin, hd);
    capacity = n;
  }
};

// Where token i of a call sits. One sequence continuing a cache (seq_len = 0): position and cache
// slot pos0 + i, attending to slots 0 .. pos0 + i. Calibration (seq_len > 0): n / seq_len sequences,
// each from position 0, token i in slot i of a cache as long as the call, attending to its own
// sequence's slots only.
struct Positions {
  int64_t pos0 = 0;
  int64_t seq_len = 0;
  int64_t position(int64_t i) const { return seq_len > 0 ? i % seq_len : pos0 + i; }
  int64_t slot(int64_t i) const { return seq_len > 0 ? i : pos0 + i; }
  int64_t first_slot(int64_t i) const { return seq_len > 0 ? i / seq_len * seq_len : 0; }
};

// One layer's cache: Kt (n_head_kv, head_dim, stride), V (n_head_kv, stride, head_dim).
struct KvLayer {
  float* k = nullptr;
  float* v = nullptr;
  int64_t stride = 0;
};

// Runs fn(begin, end) over n tokens, in parallel when each thread gets at least ~32k operations of
// `cost_per_token` (below that a hand-off costs more than it saves, as in decode).
void for_tokens(int64_t n, int64_t cost_per_token, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, cost_per_token));
  if (n <= grain) {
    fn(0, n);
    return;
  }
  parallel_for(n, grain, fn);
}

void norm_rows(const float* x, const Tensor& weight, int64_t n, int64_t d, float eps, float* y) {
  for_tokens(n, 3 * d, [&](int64_t i0, int64_t i1) {
    rms_norm_rows(x + i0 * d, weight.as<float>(), i1 - i0, d, eps, y + i0 * d);
  });
}

void add_rows(float* x, const float* delta, int64_t count) {
  for (int64_t i = 0; i < count; ++i) x[i] += delta[i];
}

Status call_hook(const LinearHook* hook, const std::vector<std::string>& names, const float* x, int64_t n,
                 int64_t K) {
  if (hook == nullptr || !*hook) return ok_status();
  return (*hook)(LinearInput{names, x, n, K});
}

// Runs linear group g of a block; an Error (a non-finite activation, say: docs/design.md section 8)
// names the block and the linear, so a user can tell which layer overflowed.
Status apply_group(const Block& block, int64_t b, int g, const float* x, int64_t n, float* y) {
  Status s = block.linears[static_cast<size_t>(g)]->apply(x, n, y);
  if (!s.ok()) return s.error().with_context("blk." + std::to_string(b) + "." + kGroups[g].label + ": ");
  return s;
}

Status run_block(const LlamaModel::Impl& m, const Block& block, int64_t b, Scratch& s, int64_t n, const Positions& at,
                 const KvLayer& kv, const LinearHook* hook) {
  static const std::vector<std::string> kQkvNames = {"attn_q", "attn_k", "attn_v"};
  static const std::vector<std::string> kOutputNames = {"attn_output"};
  static const std::vector<std::string> kGateUpNames = {"ffn_gate", "ffn_up"};
  static const std::vector<std::string> kDownNames = {"ffn_down"};
  const LlamaParams& p = m.params;
  const int64_t d = p.n_embd, hd = p.head_dim(), nh = p.n_head, nkv = p.n_head_kv;
  const int64_t qkv_width = (nh + 2 * nkv) * hd;
  float* x = s.x.data();

  // Attention.
  norm_rows(x, block.attn_norm, n, d, p.rms_eps, s.xn.data());
  NMKIT_TRY(call_hook(hook, kQkvNames, s.xn.data(), n, d));
  NMKIT_TRY(apply_group(block, b, kGroupQkv, s.xn.data(), n, s.qkv.data()));
  for_tokens(n, 4 * qkv_width, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* row = s.qkv.data() + i * qkv_width;
      const float* cs = s.cos_sin.data() + i * hd;
      rope_rotate(row, nh + nkv, hd, hd, cs);  // q heads then k heads, contiguous
      const int64_t slot = at.slot(i);
      const float* k = row + nh * hd;
      const float* v = k + nkv * hd;
      for (int64_t g = 0; g < nkv; ++g) {
        float* kt = kv.k + g * hd * kv.stride + slot;
        for (int64_t e = 0; e < hd; ++e) kt[e * kv.stride] = k[g * hd + e];
        std::memcpy(kv.v + (g * kv.stride + slot) * hd, v + g * hd, static_cast<size_t>(hd) * sizeof(float));
      }
    }
  });
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  // Tasks: (block of up to `per_block` consecutive tokens of one sequence, kv head, chunk of at most
  // kMaxQueries of the group's query heads); the block's tokens times the chunk's heads are one
  // attend() call, whose queries share every load of the cached keys and values (SmolLM2: 4 tokens x
  // 3 heads = 12 queries, 12 sums in flight instead of 3).
  const int64_t group = nh / nkv;
  const int64_t heads = std::min<int64_t>(group, kMaxQueries);
  const int64_t chunks = (group + heads - 1) / heads;
  const int64_t per_block = chunks == 1 ? std::max<int64_t>(1, kMaxQueries / heads) : 1;
  const int64_t seq_tokens = at.seq_len > 0 ? at.seq_len : n;
  const int64_t seq_blocks = (seq_tokens + per_block - 1) / per_block;
  const int64_t blocks = n / seq_tokens * seq_blocks;
  const int64_t span = at.seq_len > 0 ? at.seq_len : at.pos0 + n;  // longest attention of the call
  const int64_t task_cost = std::max<int64_t>(1, span * hd * 4 * heads * std::min(per_block, seq_tokens));
  const int64_t grain = std::max<int64_t>(1, 65536 / task_cost);
  const int64_t tasks = blocks * nkv * chunks;
  auto attend_tasks = [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> scores;
    const size_t need = static_cast<size_t>(span * kMaxQueries);
    if (scores.size() < need) scores.resize(need);
    for (int64_t t = t0; t < t1; ++t) {
      // Blocks in the order 0, last, 1, last-1, ...: a causal block costs in proportion to its
      // position, and parallel_for hands each thread a contiguous range of tasks, which this order
      // gives equal costs (in token order the last half of a prefill costs 3x the first).
      const int64_t k = t / (nkv * chunks), g = t / chunks % nkv, c = t % chunks;
      const int64_t block_index = k % 2 == 0 ? k / 2 : blocks - 1 - k / 2;
      const int64_t in_seq = block_index % seq_blocks;
      const int64_t i0 = block_index / seq_blocks * seq_tokens + in_seq * per_block;
      const int64_t count = std::min(per_block, seq_tokens - in_seq * per_block);
      const int64_t h0 = g * group + c * heads;
      const int64_t nh_chunk = std::min<int64_t>(heads, g * group + group - h0);
      const int64_t first = at.first_slot(i0);
      const float* q[kMaxQueries];
      float* out[kMaxQueries];
      int64_t n_pos[kMaxQueries];
      int nq = 0;
      for (int64_t i = i0; i < i0 + count; ++i) {
        for (int64_t e = 0; e < nh_chunk; ++e, ++nq) {
          q[nq] = s.qkv.data() + i * qkv_width + (h0 + e) * hd;
          out[nq] = s.att.data() + i * nh * hd + (h0 + e) * hd;
          n_pos[nq] = at.slot(i) - first + 1;
        }
      }
      attend(q, n_pos, nq, kv.k + g * hd * kv.stride + first, kv.stride, kv.v + (g * kv.stride + first) * hd, hd,
             scale, scores.data(), out);
    }
  };
  if (tasks <= grain) attend_tasks(0, tasks);
  else parallel_for(tasks, grain, attend_tasks);
  NMKIT_TRY(call_hook(hook, kOutputNames, s.att.data(), n, nh * hd));
  NMKIT_TRY(apply_group(block, b, kGroupOutput, s.att.data(), n, s.tmp.data()));
  for_tokens(n, d, [&](int64_t i0, int64_t i1) { add_rows(x + i0 * d, s.tmp.data() + i0 * d, (i1 - i0) * d); });

  // SwiGLU MLP.
  norm_rows(x, block.ffn_norm, n, d, p.rms_eps, s.xn.data());
  NMKIT_TRY(call_hook(hook, kGateUpNames, s.xn.data(), n, d));
  NMKIT_TRY(apply_group(block, b, kGroupGateUp, s.xn.data(), n, s.gate_up.data()));
  const int64_t ff = p.n_ff;
  for_tokens(n, 16 * ff, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* gu = s.gate_up.data() + i * 2 * ff;
      swiglu(gu, gu + ff, ff, s.act.data() + i * ff);
    }
  });
  NMKIT_TRY(call_hook(hook, kDownNames, s.act.data(), n, ff));
  NMKIT_TRY(apply_group(block, b, kGroupDown, s.act.data(), n, s.tmp.data()));
  for_tokens(n, d, [&](int64_t i0, int64_t i1) { add_rows(x + i0 * d, s.tmp.data() + i0 * d, (i1 - i0) * d); });
  return ok_status();
}

void compute_angles(const LlamaParams& p, int64_t n, const Positions& at, Scratch& s) {
  const int64_t hd = p.head_dim();
  for_tokens(n, 20 * hd, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) rope_angles(at.position(i), hd, p.rope_base, s.cos_sin.data() + i * hd);
  });
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

void embed_rows(const LlamaModel::Impl& m, const int32_t* tokens, int64_t n, float* hidden) {
  const int64_t d = m.params.n_embd;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(hidden + i * d, m.token_embd.as<float>() + static_cast<int64_t>(tokens[i]) * d,
                static_cast<size_t>(d) * sizeof(float));
  }
}

}  // namespace
}  // namespace model

struct LlamaSession::Impl {
  const LlamaModel::Impl* model = nullptr;
  int64_t n_ctx = 0;
  int64_t pos = 0;
  std::vector<float> k, v;  // n_layer layers of (n_head_kv, head_dim, n_ctx) and (n_head_kv, n_ctx, head_dim)
  model::Scratch scratch;
  int64_t layer_floats() const {
    return model->params.n_head_kv * model->params.head_dim() * n_ctx;
  }
};

LlamaSession::LlamaSession(const LlamaModel& model, int64_t n_ctx) : impl_(std::make_unique<Impl>()) {
  impl_->model = model.impl_.get();
  impl_->n_ctx = std::max<int64_t>(1, n_ctx);
  const size_t floats = static_cast<size_t>(model.params().n_layer * impl_->layer_floats());
  impl_->k.assign(floats, 0.0f);
  impl_->v.assign(floats, 0.0f);
}
LlamaSession::LlamaSession(LlamaSession&&) noexcept = default;
LlamaSession& LlamaSession::operator=(LlamaSession&&) noexcept = default;
LlamaSession::~LlamaSession() = default;
int64_t LlamaSession::n_ctx() const { return impl_->n_ctx; }
int64_t LlamaSession::position() const { return impl_->pos; }
void LlamaSession::reset() { impl_->pos = 0; }

Status LlamaModel::forward(LlamaSession& session, const int32_t* tokens, int64_t n, float* logits,
                           int64_t logits_from) const {
  LlamaSession::Impl& st = *session.impl_;
  const LlamaParams& p = impl_->params;
  if (st.model != impl_.get()) return Error("model: the session was made for another model");
  if (n < 1) return Error("model: forward of " + std::to_string(n) + " tokens");
  if (logits_from < 0 || logits_from > n) {
    return Error("model: logits_from " + std::to_string(logits_from) + " is outside 0.." + std::to_string(n));
  }
  if (st.pos + n > st.n_ctx) {
    return Error("model: " + std::to_string(st.pos) + " cached + " + std::to_string(n) +
                 " new tokens exceed the context of " + std::to_string(st.n_ctx));
  }
  NMKIT_TRY(model::check_tokens(p, tokens, n));
  model::Scratch& s = st.scratch;
  s.reserve(p, n);
  const model::Positions at{st.pos, 0};
  model::embed_rows(*impl_, tokens, n, s.x.data());
  model::compute_angles(p, n, at, s);
  for (int64_t b = 0; b < p.n_layer; ++b) {
    const model::KvLayer kv{st.k.data() + b * st.layer_floats(), st.v.data() + b * st.layer_floats(), st.n_ctx};
    NMKIT_TRY(model::run_block(*impl_, impl_->blocks[static_cast<size_t>(b)], b, s, n, at, kv, nullptr));
  }
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
  const int64_t n = n_seq * seq_len, d = p.n_embd;
  model::Scratch s;
  s.reserve(p, n);
  std::memcpy(s.x.data(), hidden, static_cast<size_t>(n * d) * sizeof(float));
  const model::Positions at{0, seq_len};
  model::compute_angles(p, n, at, s);
  const size_t floats = static_cast<size_t>(p.n_head_kv * p.head_dim() * n);
  std::vector<float> k(floats), v(floats);
  const model::KvLayer kv{k.data(), v.data(), n};
  NMKIT_TRY(model::run_block(*impl_, impl_->blocks[static_cast<size_t>(b)], b, s, n, at, kv, &hook));
  std::memcpy(hidden, s.x.data(), static_cast<size_t>(n * d) * sizeof(float));
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
