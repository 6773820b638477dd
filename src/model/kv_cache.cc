// The KV cache of one sequence (kv_cache.h).
#include "model/kv_cache.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace nmkit::model {

void KvCache::Free::operator()(float* p) const { std::free(p); }

size_t KvCache::bytes(const LlamaParams& p, int64_t n_ctx) {
  return static_cast<size_t>(p.n_layer) * 2 * static_cast<size_t>(p.n_head_kv * p.head_dim()) *
         static_cast<size_t>(std::max<int64_t>(1, n_ctx)) * sizeof(float);
}

Result<KvCache> KvCache::make(const LlamaParams& p, int64_t n_ctx) {
  n_ctx = std::max<int64_t>(1, n_ctx);
  const size_t total = bytes(p, n_ctx);
  auto* data = static_cast<float*>(std::calloc(total / sizeof(float), sizeof(float)));
  if (data == nullptr) {
    return Error("model: cannot allocate the KV cache of " + std::to_string(n_ctx) + " positions (" +
                 std::to_string(total >> 20) + " MiB)");
  }
  return KvCache(std::unique_ptr<float, Free>(data), p.n_head_kv * p.head_dim() * n_ctx, p.n_layer, n_ctx);
}

KvLayer KvCache::layer(int64_t b) const {
  float* base = data_.get();
  return KvLayer{base + b * layer_floats_, base + (n_layer_ + b) * layer_floats_, n_ctx_};
}

}  // namespace nmkit::model
