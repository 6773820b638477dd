// The token embedding in its file's dtype (embedding.h).
#include "model/embedding.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "nmkit/threads.h"

namespace nmkit::model {

Result<Embedding> Embedding::over(MappedTensor stored, const std::string& name) {
  if (stored.shape.size() != 2) return Error(name + ": expected a matrix, got shape " + shape_str(stored.shape));
  const int64_t n_vocab = stored.shape[0], d = stored.shape[1];
  if (!ggml_can_dequantize(stored.type) || d % ggml_block_elements(stored.type) != 0) {
    return Error(name + ": ggml type " + std::string(ggml_type_name(stored.type)) + " rows of " + std::to_string(d) +
                 " cannot be looked up one by one");
  }
  // Every value finite, as a loaded tensor is checked (docs/design.md 2): rows converted in chunks
  // over the pool, the first bad element reported.
  std::atomic<int64_t> bad{-1};
  parallel_for(n_vocab, std::max<int64_t>(1, 65536 / d), [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(d));
    for (int64_t r = r0; r < r1 && bad.load(std::memory_order_relaxed) < 0; ++r) {
      NMKIT_ASSERT(dequantize_ggml(stored.type, stored.data + static_cast<size_t>(r) * stored.row_bytes, row.data(), d).ok());
      for (int64_t k = 0; k < d; ++k) {
        if (!std::isfinite(row[static_cast<size_t>(k)])) {
          int64_t expected = -1;
          bad.compare_exchange_strong(expected, r * d + k);
          break;
        }
      }
    }
  });
  if (const int64_t i = bad.load(); i >= 0) {
    std::vector<float> row(static_cast<size_t>(d));
    NMKIT_ASSERT(dequantize_ggml(stored.type, stored.data + static_cast<size_t>(i / d) * stored.row_bytes, row.data(), d).ok());
    return Error(name + ": element " + std::to_string(i) + " is " + std::to_string(row[static_cast<size_t>(i % d)]));
  }
  Embedding e;
  e.n_vocab_ = n_vocab;
  e.n_embd_ = d;
  e.stored_ = std::move(stored);
  return e;
}

Embedding Embedding::of(Tensor f32) {
  Embedding e;
  e.n_vocab_ = f32.rows();
  e.n_embd_ = f32.cols();
  e.f32_ = std::move(f32);
  return e;
}

void Embedding::rows(const int32_t* tokens, int64_t n, float* out) const {
  const int64_t d = n_embd_;
  for (int64_t i = 0; i < n; ++i) {
    const auto t = static_cast<size_t>(tokens[i]);
    if (stored_) {
      // Cannot fail: the type and row width were checked by over().
      NMKIT_ASSERT(dequantize_ggml(stored_->type, stored_->data + t * stored_->row_bytes, out + i * d, d).ok());
    } else {
      std::memcpy(out + i * d, f32_.as<float>() + t * static_cast<size_t>(d), static_cast<size_t>(d) * sizeof(float));
    }
  }
}

Tensor Embedding::to_f32() const {
  if (!stored_) return Tensor::copy_of(f32_.view());
  Tensor out = Tensor::empty(DType::F32, {n_vocab_, n_embd_});
  parallel_for(n_vocab_, std::max<int64_t>(1, 65536 / n_embd_), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      NMKIT_ASSERT(dequantize_ggml(stored_->type, stored_->data + static_cast<size_t>(r) * stored_->row_bytes,
                                   out.as<float>() + r * n_embd_, n_embd_).ok());
    }
  });
  return out;
}

}  // namespace nmkit::model
