// Element access shared by the format code: "non-zero" on raw bits and element copies by size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <bit>
#include <cstring>
#include <string>
#include <string_view>

#include "nmkit/dtype.h"
#include "nmkit/pattern.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit::format_detail {

// A value is non-zero when it compares != 0: for floating types every bit but the sign (so -0 is
// zero and NaN is non-zero), for integer types any bit.
inline uint64_t magnitude_bits_mask(DType dtype) {
  switch (dtype) {
    case DType::F64: return 0x7FFFFFFFFFFFFFFFull;
    case DType::F32: return 0x7FFFFFFFull;
    case DType::F16:
    case DType::BF16: return 0x7FFFull;
    case DType::F8_E4M3:
    case DType::F8_E5M2: return 0x7Full;
    default: return ~uint64_t{0};
  }
}

inline uint64_t load_bits(const std::byte* p, size_t esize) {
  switch (esize) {
    case 1: return static_cast<uint64_t>(*p);
    case 2: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    default: { uint64_t v; std::memcpy(&v, p, 8); return v; }
  }
}

}  // namespace nmkit::format_detail

namespace nmkit::format_detail {

// The fill rule of design.md 4.2/4.3: the group's non-zero positions, then its lowest-index zero
// positions (padding positions of a tail group count as zeros) until `keep` positions are chosen.
// `nonzero` has bit j set for a non-zero at group position j < group; it must have <= keep bits.
inline uint64_t fill_positions(uint64_t nonzero, int group, int keep) {
  const uint64_t all = group == 64 ? ~uint64_t{0} : (uint64_t{1} << group) - 1;
  uint64_t chosen = nonzero;
  uint64_t zeros = all & ~nonzero;
  for (int c = std::popcount(nonzero); c < keep; ++c) {
    chosen |= zeros & (~zeros + 1);  // lowest zero position
    zeros &= zeros - 1;
  }
  return chosen;
}

// Bit j set when element j of the n real elements at `p` is non-zero.
template <class E>
inline uint64_t nonzero_bits(const std::byte* p, int n, E mag_mask) {
  uint64_t bits = 0;
  for (int j = 0; j < n; ++j) {
    E v;
    std::memcpy(&v, p + j * sizeof(E), sizeof(E));
    bits |= static_cast<uint64_t>((v & mag_mask) != 0) << j;
  }
  return bits;
}

}  // namespace nmkit::format_detail

namespace nmkit::format_detail {

inline std::string name_prefix(std::string_view name) {
  return name.empty() ? std::string() : "tensor '" + std::string(name) + "': ";
}

// Compression input: a 2-D tensor of a prunable dtype with data.
inline Status check_dense(const TensorView& dense, std::string_view name) {
  if (dense.shape.size() != 2 || dense.shape[0] < 0 || dense.shape[1] < 0) {
    return Error(name_prefix(name) + "compression needs a 2-D tensor [rows, K], got shape " +
                 shape_str(dense.shape));
  }
  if (!is_prunable(dense.dtype)) {
    return Error(name_prefix(name) + "dtype " + std::string(dtype_name(dense.dtype)) +
                 " cannot be compressed (expected F32, F16 or BF16)");
  }
  if (dense.data == nullptr && dense.numel() > 0) return Error(name_prefix(name) + "has no data");
  return ok_status();
}

inline Error violation_error(std::string_view name, int64_t row, int64_t group, int nonzeros,
                             Pattern pattern) {
  return Error(name_prefix(name) + "row " + std::to_string(row) + ", group " +
               std::to_string(group) + " has " + std::to_string(nonzeros) +
               " non-zeros, more than pattern " + pattern.str() + " allows");
}

}  // namespace nmkit::format_detail
