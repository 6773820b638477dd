// CUTLASS's own host code on nmkit's cutlass_sm80 layout (include/nmkit/cutlass_sm80.h), for the
// host programs nvcc builds in tests/cuda (no GPU): cutlass::reorder_meta and cutlass::uncompress.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cutlass/layout/matrix.h"
#include "cutlass/util/host_reorder.h"
#include "cutlass/util/host_uncompress.h"
#include "nmkit/cutlass_sm80.h"
#include "nmkit/format.h"

namespace nmkit::test {

// The layout's dense matrix by CUTLASS: the unreordered words (sparse24's, padding groups 0x4) go
// through reorder_meta (compared with nmkit's bytes) and uncompress (returned, rows_pad x K_pad).
template <class Value, class Word>
std::vector<Value> cutlass_dense(const Sparse24& s, const CutlassSm80& layout) {
  const int64_t rows_pad = layout.rows_pad(), K_pad = layout.K_pad();
  const int64_t cols = K_pad / layout.meta_bits();
  static_assert(sizeof(Word) * 8 == 256 / (sizeof(Value) * 8), "a word: one nibble per 4 of 256 / bits values");
  std::vector<uint8_t> nibbles(static_cast<size_t>(rows_pad * layout.meta_row_bytes()), 0x44);
  for (int64_t r = 0; r < s.rows(); ++r) {
    for (int64_t g = 0; g < s.K_pad() / 4; ++g) {
      const uint8_t nibble = (s.meta.as<uint8_t>()[r * s.meta_stride() + g / 2] >> (4 * (g & 1))) & 0xF;
      uint8_t& byte = nibbles[static_cast<size_t>(r * layout.meta_row_bytes() + g / 2)];
      byte = static_cast<uint8_t>((byte & ~(0xF << (4 * (g & 1)))) | nibble << (4 * (g & 1)));
    }
  }
  std::vector<Word> words(static_cast<size_t>(rows_pad * cols));
  std::memcpy(words.data(), nibbles.data(), nibbles.size());
  std::vector<Word> reordered(words.size());
  cutlass::TensorRef<Word, cutlass::layout::RowMajor> src(words.data(), cutlass::layout::RowMajor(cols));
  cutlass::TensorRef<Word, cutlass::layout::ColumnMajorInterleaved<2>> dst(
      reordered.data(), cutlass::layout::ColumnMajorInterleaved<2>(2 * rows_pad));
  cutlass::reorder_meta(dst, src, {static_cast<int>(rows_pad), 0, static_cast<int>(cols)});
  EXPECT_EQ(layout.meta.nbytes(), reordered.size() * sizeof(Word));
  EXPECT_EQ(0, std::memcmp(layout.meta.data(), reordered.data(), layout.meta.nbytes())) << "reorder_meta differs";

  std::vector<Value> dense(static_cast<size_t>(rows_pad * K_pad));
  std::vector<Value> values(static_cast<size_t>(rows_pad * K_pad / 2));
  std::memcpy(values.data(), layout.values.data(), layout.values.nbytes());
  cutlass::TensorRef<Value, cutlass::layout::RowMajor> out(dense.data(), cutlass::layout::RowMajor(K_pad));
  cutlass::TensorRef<Value, cutlass::layout::RowMajor> in(values.data(), cutlass::layout::RowMajor(K_pad / 2));
  cutlass::uncompress(out, in, src, static_cast<int>(rows_pad), static_cast<int>(K_pad));
  return dense;
}

}  // namespace nmkit::test
