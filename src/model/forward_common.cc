// The pieces of the forward pass shared by attention, feed-forward and the model (forward_common.h).
#include "model/forward_common.h"

#include <algorithm>

#include "model/model_kernels.h"
#include "nmkit/threads.h"

namespace nmkit::model {

void Scratch::reserve(const LlamaParams& p, int64_t n) {
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
  grow(cos_sin_local, p.sliding_window > 0 ? hd : 0);
  capacity = n;
}

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

void add_rows(float* x, const float* delta, int64_t n, int64_t d) {
  for_tokens(n, d, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0 * d; i < i1 * d; ++i) x[i] += delta[i];
  });
}

Status call_hook(const LinearHook* hook, const std::vector<std::string>& names, const float* x, int64_t n,
                 int64_t K) {
  if (hook == nullptr || !*hook) return ok_status();
  return (*hook)(LinearInput{names, x, n, K});
}

Status apply_group(const Block& block, int64_t b, int g, const float* x, int64_t n, float* y) {
  Status s = block.linears[static_cast<size_t>(g)]->apply(x, n, y);
  if (!s.ok()) return s.error().with_context("blk." + std::to_string(b) + "." + kGroups[g].label + ": ");
  return s;
}

}  // namespace nmkit::model
