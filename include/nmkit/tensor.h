// Tensors: a dtype, a shape and bytes. TensorView borrows bytes (from a memory-mapped file, say);
// Tensor owns them. Matrices are 2-D [rows, K], row-major (docs/design.md section 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nmkit/dtype.h"

namespace nmkit {

using Shape = std::vector<int64_t>;

// Checked size arithmetic: every product of sizes (element counts, byte counts, padded widths) goes
// through these, so a hostile shape such as [2^32, 2^31, 0] or [2^62, 4] never overflows int64.
// a * b for a, b >= 0; nullopt when either is negative or the product exceeds INT64_MAX.
std::optional<int64_t> checked_mul(int64_t a, int64_t b);
// a + b for a, b >= 0; nullopt when either is negative or the sum exceeds INT64_MAX.
std::optional<int64_t> checked_add(int64_t a, int64_t b);
// Elements of `shape`: 0 when any dimension is 0 (whatever the others), nullopt when a dimension is
// negative or the product exceeds INT64_MAX.
std::optional<int64_t> checked_numel(const Shape& shape);
// Bytes of a `dtype` tensor of `shape`, nullopt as for checked_numel or when the bytes exceed
// INT64_MAX.
std::optional<int64_t> checked_nbytes(const Shape& shape, DType dtype);

// checked_numel, or -1 for a shape it refuses (shapes from files are checked by their readers, so
// -1 reaches no kernel; a caller that builds shapes itself checks numel() >= 0).
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[384, 1536]"

struct TensorView {
  DType dtype = DType::F32;
  Shape shape;
  const std::byte* data = nullptr;

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const;  // numel() * dtype size; asserts a valid shape (numel() >= 0)
  int64_t rows() const { return shape.at(0); }           // 2-D only
  int64_t cols() const { return shape.at(1); }           // 2-D only: K
  template <class T> const T* as() const { return reinterpret_cast<const T*>(data); }
};

// Frees a tensor's heap or mapped storage (src/core/page_bytes.h): `mapped` is the mapping's
// length, 0 for a heap buffer.
struct TensorBytesFree {
  size_t mapped = 0;
  void operator()(std::byte* p) const;
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised storage: every producer writes all of it. The shape must pass checked_nbytes
  // (an internal invariant: asserted).
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
  static Tensor allocated(DType dtype, Shape shape, bool zeroed);

  DType dtype_ = DType::F32;
  Shape shape_;
  size_t nbytes_ = 0;
  std::unique_ptr<std::byte[], TensorBytesFree> data_;
};

// All elements of a prunable-dtype view as f32.
std::vector<float> to_f32(const TensorView& view);

}  // namespace nmkit
