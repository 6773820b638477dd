// Tensors: a dtype, a shape and bytes. TensorView borrows bytes (from a memory-mapped file, say);
// Tensor owns them. Matrices are 2-D [rows, K], row-major (design.md section 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nmkit/dtype.h"

namespace nmkit {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[384, 1536]"

struct TensorView {
  DType dtype = DType::F32;
  Shape shape;
  const std::byte* data = nullptr;

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t rows() const { return shape.at(0); }           // 2-D only
  int64_t cols() const { return shape.at(1); }           // 2-D only: K
  template <class T> const T* as() const { return reinterpret_cast<const T*>(data); }
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised storage: every producer writes all of it.
  static Tensor empty(DType dtype, Shape shape);
  static Tensor zeros(DType dtype, Shape shape);
  // Converts f32 values to a prunable dtype (exact for values representable in it).
  static Tensor from_f32(const std::vector<float>& values, Shape shape, DType dtype = DType::F32);
  static Tensor copy_of(const TensorView& view);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return nbytes_; }
  int64_t rows() const { return shape_.at(0); }
  int64_t cols() const { return shape_.at(1); }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  template <class T> T* as() { return reinterpret_cast<T*>(data_.get()); }
  template <class T> const T* as() const { return reinterpret_cast<const T*>(data_.get()); }
  TensorView view() const { return TensorView{dtype_, shape_, data_.get()}; }
  // All elements as f32 (prunable dtypes only).
  std::vector<float> to_f32() const;

 private:
  DType dtype_ = DType::F32;
  Shape shape_;
  size_t nbytes_ = 0;
  std::unique_ptr<std::byte[]> data_;
};

// All elements of a prunable-dtype view as f32.
std::vector<float> to_f32(const TensorView& view);

}  // namespace nmkit
