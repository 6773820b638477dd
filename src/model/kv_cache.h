// The keys and values of one sequence, per layer (docs/design.md 11.2). Layout of a layer: K
// transposed, (n_head_kv, head_dim, n_ctx), so that the scores of a query over all positions are a
// sum over head_dim of contiguous rows (vectorizes without reordering float sums); V (n_head_kv,
// n_ctx, head_dim). Allocated once for the context the caller asks for, zero-filled by the kernel's
// fresh pages (calloc): a cache holds in RSS only the positions a sequence has written, and unwritten
// positions read as 0.0f, finite, as attend() requires.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "nmkit/model.h"
#include "nmkit/status.h"

namespace nmkit::model {

// One layer's view: Kt (n_head_kv, head_dim, stride), V (n_head_kv, stride, head_dim).
struct KvLayer {
  float* k = nullptr;
  float* v = nullptr;
  int64_t stride = 0;
};

class KvCache {
 public:
  // An Error naming the bytes when the cache cannot be allocated (n_ctx < 1 is taken as 1).
  static Result<KvCache> make(const LlamaParams& p, int64_t n_ctx);
  // Bytes of a cache of n_ctx positions: n_layer x 2 x n_head_kv x head_dim x n_ctx floats.
  static size_t bytes(const LlamaParams& p, int64_t n_ctx);

  KvLayer layer(int64_t b) const;
  int64_t n_ctx() const { return n_ctx_; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  KvCache(std::unique_ptr<float, Free> data, int64_t layer_floats, int64_t n_layer, int64_t n_ctx)
      : data_(std::move(data)), layer_floats_(layer_floats), n_layer_(n_layer), n_ctx_(n_ctx) {}
  std::unique_ptr<float, Free> data_;  // n_layer K's, then n_layer V's
  int64_t layer_floats_ = 0;
  int64_t n_layer_ = 0;
  int64_t n_ctx_ = 0;
};

}  // namespace nmkit::model
