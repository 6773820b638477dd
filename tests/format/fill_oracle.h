// An independent statement of the fill rule of docs/design.md 4.2/4.3 for the format tests: list the
// non-zero positions of a group (value != 0 as a float, so -0 is zero and NaN is not), then the
// lowest-index zero positions, padding positions of a tail group counting as zeros; sort. Shares
// no code with src/format.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/tensor.h"

namespace nmkit::test {

// Positions (0..group-1) a group stores, increasing; `values` holds the t <= group real elements.
inline std::vector<int> stored_positions(const float* values, int t, int group, int keep) {
  std::vector<int> pos;
  for (int j = 0; j < t; ++j) {
    if (values[j] != 0.0f || values[j] != values[j]) pos.push_back(j);
  }
  for (int j = 0; j < group && static_cast<int>(pos.size()) < keep; ++j) {
    const bool zero = j >= t || values[j] == 0.0f;
    if (zero) pos.push_back(j);
  }
  std::sort(pos.begin(), pos.end());
  return pos;
}

inline int count_nonzero(const float* values, int t) {
  int n = 0;
  for (int j = 0; j < t; ++j) n += (values[j] != 0.0f || values[j] != values[j]) ? 1 : 0;
  return n;
}

// Raw bits of element i of a tensor (2- or 4-byte dtypes).
inline uint32_t bits_at(const std::byte* data, DType dtype, int64_t i) {
  uint32_t v = 0;
  const size_t es = dtype_size(dtype);
  std::memcpy(&v, data + i * es, es);
  return v;
}

// The expected nm packing of a compliant dense tensor, built from stored_positions.
inline void expected_nm(const Tensor& dense, Pattern p, std::vector<uint32_t>& values,
                        std::vector<uint8_t>& mask) {
  const int64_t rows = dense.rows(), K = dense.cols();
  const int64_t groups = (K + p.group - 1) / p.group, stride = (groups * p.group + 7) / 8;
  const std::vector<float> f = dense.to_f32();
  values.assign(rows * groups * p.keep, 0);
  mask.assign(rows * stride, 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int t = static_cast<int>(std::min<int64_t>(p.group, K - g * p.group));
      const auto pos = stored_positions(f.data() + r * K + g * p.group, t, p.group, p.keep);
      for (size_t s = 0; s < pos.size(); ++s) {
        const int64_t k = g * p.group + pos[s];
        if (k < K) values[(r * groups + g) * p.keep + s] = bits_at(dense.data(), dense.dtype(), r * K + k);
        mask[r * stride + k / 8] = static_cast<uint8_t>(mask[r * stride + k / 8] | (1u << (k % 8)));
      }
    }
  }
}

// The expected canonical 2:4 packing: values and one nibble pos0 | pos1 << 2 per group.
inline void expected_sparse24(const Tensor& dense, std::vector<uint32_t>& values,
                              std::vector<uint8_t>& meta) {
  const int64_t rows = dense.rows(), K = dense.cols();
  const int64_t groups = (K + 3) / 4, stride = (groups * 4 + 7) / 8;
  const std::vector<float> f = dense.to_f32();
  values.assign(rows * groups * 2, 0);
  meta.assign(rows * stride, 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int t = static_cast<int>(std::min<int64_t>(4, K - g * 4));
      const auto pos = stored_positions(f.data() + r * K + g * 4, t, 4, 2);
      for (int s = 0; s < 2; ++s) {
        const int64_t k = g * 4 + pos[s];
        if (k < K) values[(r * groups + g) * 2 + s] = bits_at(dense.data(), dense.dtype(), r * K + k);
      }
      const int nibble = pos[0] + 4 * pos[1];
      meta[r * stride + g / 2] = static_cast<uint8_t>(meta[r * stride + g / 2] | (nibble << (4 * (g % 2))));
    }
  }
}

inline std::vector<uint32_t> all_bits(const Tensor& t) {
  std::vector<uint32_t> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = bits_at(t.data(), t.dtype(), i);
  return v;
}

inline std::vector<uint8_t> all_bytes(const Tensor& t) {
  return std::vector<uint8_t>(t.as<uint8_t>(), t.as<uint8_t>() + t.nbytes());
}

}  // namespace nmkit::test
