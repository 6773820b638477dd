#include "nmkit/tensor.h"

#include <cstring>

#include "core/page_bytes.h"
#include "nmkit/status.h"

namespace nmkit {

std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t product = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

std::optional<int64_t> checked_numel(const Shape& shape) {
  bool any_zero = false;
  for (const int64_t d : shape) {
    if (d < 0) return std::nullopt;
    any_zero |= d == 0;
  }
  // An empty dimension makes the product 0 whatever the others are; multiplying in order first
  // would overflow on [2^32, 2^31, 0].
  if (any_zero) return 0;
  int64_t n = 1;
  for (const int64_t d : shape) {
    const auto next = checked_mul(n, d);
    if (!next) return std::nullopt;
    n = *next;
  }
  return n;
}

std::optional<int64_t> checked_nbytes(const Shape& shape, DType dtype) {
  const auto numel = checked_numel(shape);
  if (!numel) return std::nullopt;
  return checked_mul(*numel, static_cast<int64_t>(dtype_size(dtype)));
}

int64_t shape_numel(const Shape& shape) { return checked_numel(shape).value_or(-1); }

size_t TensorView::nbytes() const {
  const auto bytes = checked_nbytes(shape, dtype);
  NMKIT_ASSERT(bytes.has_value());
  return static_cast<size_t>(*bytes);
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor Tensor::allocated(DType dtype, Shape shape, bool zeroed) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const auto nbytes = checked_nbytes(t.shape_, dtype);
  NMKIT_ASSERT(nbytes.has_value());
  t.nbytes_ = static_cast<size_t>(*nbytes);
  PageBytes bytes = allocate_page_bytes(t.nbytes_, zeroed);
  t.data_ = std::unique_ptr<std::byte[], TensorBytesFree>(bytes.release(), TensorBytesFree{bytes.get_deleter().mapped});
  return t;
}

void TensorBytesFree::operator()(std::byte* p) const { PageBytesFree{mapped}(p); }

// Uninitialised where it comes from the heap: producers write every byte, and a 1 GB output should
// not be zeroed first.
Tensor Tensor::empty(DType dtype, Shape shape) { return allocated(dtype, std::move(shape), false); }

// A large tensor's mapping is zero already (src/core/page_bytes.h): no pass over it.
Tensor Tensor::zeros(DType dtype, Shape shape) { return allocated(dtype, std::move(shape), true); }

Tensor Tensor::from_f32(const std::vector<float>& values, Shape shape, DType dtype) {
  Tensor t = empty(dtype, std::move(shape));
  NMKIT_ASSERT(static_cast<int64_t>(values.size()) == t.numel());
  convert_from_f32(dtype, values.data(), t.data(), values.size());
  return t;
}

Tensor Tensor::copy_of(const TensorView& view) {
  Tensor t = empty(view.dtype, view.shape);
  if (t.nbytes_ > 0) std::memcpy(t.data(), view.data, t.nbytes_);
  return t;
}

std::vector<float> Tensor::to_f32() const { return nmkit::to_f32(view()); }

std::vector<float> to_f32(const TensorView& view) {
  std::vector<float> out(static_cast<size_t>(view.numel()));
  convert_to_f32(view.dtype, view.data, out.data(), out.size());
  return out;
}

}  // namespace nmkit
