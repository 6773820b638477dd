#include "nmkit/tensor.h"

#include <cstring>

#include "nmkit/status.h"

namespace nmkit {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.nbytes_ = static_cast<size_t>(shape_numel(t.shape_)) * dtype_size(dtype);
  // new[] without () leaves the bytes uninitialised: producers write every byte, and a 1 GB
  // output should not be zeroed first.
  t.data_.reset(new std::byte[t.nbytes_ > 0 ? t.nbytes_ : 1]);
  return t;
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t = empty(dtype, std::move(shape));
  std::memset(t.data(), 0, t.nbytes());
  return t;
}

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
