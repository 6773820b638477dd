// INT8 nm and sparse24 records packed a slice of rows at a time (src/linear/linear_pack.h
// pack_*_int8_by_rows, SparseLinear::*_int8_by_rows; docs/design.md 11.7) equal the records of the
// whole weight pruned, quantized and packed at once, byte for byte: sizes with one slice, several
// and a short last one, tails of K, bf16 and f32 values.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>

#include "nmkit/format.h"
#include "nmkit/linear.h"
#include "nmkit/prune.h"
#include "nmkit/quant.h"
#include "src/linear/linear_pack.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

using cpu::PackedLinear;

void expect_same_bytes(const cpu::AlignedBytes& a, const cpu::AlignedBytes& b, const std::string& what) {
  ASSERT_EQ(a.size, b.size) << what;
  if (a.size > 0) {
    EXPECT_EQ(std::memcmp(a.data.get(), b.data.get(), a.size), 0) << what;
  }
}

void expect_same_records(const PackedLinear& want, const PackedLinear& got) {
  EXPECT_EQ(want.kind, got.kind);
  EXPECT_EQ(want.dtype, got.dtype);
  EXPECT_EQ(want.rows, got.rows);
  EXPECT_EQ(want.K, got.K);
  EXPECT_EQ(want.K_x, got.K_x);
  EXPECT_EQ(want.row_blocks, got.row_blocks);
  EXPECT_EQ(want.superchunk, got.superchunk);
  EXPECT_EQ(want.value_stride, got.value_stride);
  EXPECT_EQ(want.mask_stride, got.mask_stride);
  EXPECT_EQ(want.streamed_bytes, got.streamed_bytes);
  expect_same_bytes(want.values, got.values, "values");
  expect_same_bytes(want.meta, got.meta, "meta");
  expect_same_bytes(want.row_scale, got.row_scale, "row_scale");
  expect_same_bytes(want.row_sum, got.row_sum, "row_sum");
}

// The slice fill a model's loader runs: rows [row0, row0 + n) of w pruned by magnitude into the slice.
template <class Packed>
Status prune_rows_into(const TensorView& w, Pattern pattern, int64_t row0, Packed& slice) {
  const int64_t K = w.cols();
  const TensorView rows{w.dtype, {slice.rows(), K}, w.data + static_cast<size_t>(row0 * K) * dtype_size(w.dtype)};
  return prune_compress(rows, pattern, PruneMethod::Magnitude, {}, slice, 0, nullptr, "w");
}

struct SliceCase {
  int64_t rows, K;
  DType dtype;
};

// rows x K: one slice (tiny), several with a short last one (2 MiB of values a slice: 1744 rows of
// 600 bf16, 124 rows of 4100 f32), K tails for 8-, 16- and 64-wide superchunks.
const SliceCase kSliceCases[] = {{1, 8, DType::BF16}, {7, 72, DType::F32}, {3501, 600, DType::BF16}, {301, 4100, DType::F32},
                       {130, 1000, DType::BF16}};

TEST(LinearPackRows, NMInt8BySlicesEqualsTheWholeWeight) {
  for (const SliceCase& c : kSliceCases) {
    for (Pattern pattern : {Pattern{6, 8}, Pattern{4, 8}, Pattern{2, 4}, Pattern{1, 4}, Pattern{3, 7}, Pattern{5, 16}}) {
      SCOPED_TRACE(std::to_string(c.rows) + " x " + std::to_string(c.K) + " " + std::string(dtype_name(c.dtype)) + " " + pattern.str());
      const Tensor w = test::random_tensor(c.dtype, {c.rows, c.K}, static_cast<uint64_t>(c.rows * 31 + c.K));
      NMPacked whole = empty_nm(c.dtype, c.rows, c.K, pattern);
      ASSERT_TRUE(prune_compress(w.view(), pattern, PruneMethod::Magnitude, {}, whole, 0).ok());
      auto codes = quantize_weights(whole.values.view(), QuantType::Int8, "w");
      ASSERT_TRUE(codes.ok()) << codes.error().message();
      auto want = cpu::pack_nm_int8(whole, *codes);
      ASSERT_TRUE(want.ok()) << want.error().message();
      std::atomic<int> slices{0};
      auto got = cpu::pack_nm_int8_by_rows(c.rows, c.K, pattern, c.dtype, [&](int64_t row0, NMPacked& slice) {
        ++slices;
        return prune_rows_into(w.view(), pattern, row0, slice);
      });
      ASSERT_TRUE(got.ok()) << got.error().message();
      expect_same_records(**want, **got);
      if (c.rows > 3000 || c.K > 4000) {
        EXPECT_GT(slices, 2);
      }
    }
  }
}

TEST(LinearPackRows, Sparse24Int8BySlicesEqualsTheWholeWeight) {
  for (const SliceCase& c : kSliceCases) {
    SCOPED_TRACE(std::to_string(c.rows) + " x " + std::to_string(c.K) + " " + std::string(dtype_name(c.dtype)));
    const Tensor w = test::random_tensor(c.dtype, {c.rows, c.K}, static_cast<uint64_t>(c.rows * 17 + c.K));
    Sparse24 whole = empty_sparse24(c.dtype, c.rows, c.K);
    ASSERT_TRUE(prune_compress(w.view(), Pattern{2, 4}, PruneMethod::Magnitude, {}, whole, 0).ok());
    auto codes = quantize_weights(whole, QuantType::Int8, "w");
    ASSERT_TRUE(codes.ok()) << codes.error().message();
    auto want = cpu::pack_sparse24_int8(*codes);
    ASSERT_TRUE(want.ok()) << want.error().message();
    std::atomic<int> slices{0};
    auto got = cpu::pack_sparse24_int8_by_rows(c.rows, c.K, c.dtype, [&](int64_t row0, Sparse24& slice) {
      ++slices;
      return prune_rows_into(w.view(), Pattern{2, 4}, row0, slice);
    });
    ASSERT_TRUE(got.ok()) << got.error().message();
    expect_same_records(**want, **got);
    if (c.rows > 3000 || c.K > 4000) {
      EXPECT_GT(slices, 2);
    }
  }
}

// A slice is zeroed before each fill, so a fill that leaves a slice unwritten fails the slice's
// validation (never passes on a previous slice's bytes), naming the slice's rows; a fill's Error
// comes back as it is.
TEST(LinearPackRows, UnwrittenSlicesAndFillErrorsAreErrors) {
  const int64_t rows = 3000, K = 600;
  const Tensor w = test::random_tensor(DType::BF16, {rows, K}, 5);
  std::atomic<int64_t> first_rows{0};
  auto got = cpu::pack_nm_int8_by_rows(rows, K, Pattern{6, 8}, DType::BF16, [&](int64_t row0, NMPacked& slice) {
    if (row0 != 0) return ok_status();
    first_rows = slice.rows();
    return prune_rows_into(w.view(), Pattern{6, 8}, 0, slice);
  });
  ASSERT_FALSE(got.ok());
  // The first failed slice in row order: the second, whichever thread ran it.
  const int64_t n = first_rows.load();
  ASSERT_GT(n, 0);
  const std::string second = "int8 nm weight rows " + std::to_string(n) + "-" + std::to_string(std::min(rows, 2 * n) - 1);
  EXPECT_NE(got.error().message().find(second), std::string::npos) << got.error().message();
  EXPECT_NE(got.error().message().find("has 0 mask bits set"), std::string::npos) << got.error().message();
  auto failed = SparseLinear::nm_int8_by_rows(rows, K, Pattern{6, 8}, DType::BF16, [&](int64_t row0, NMPacked& slice) -> Status {
    if (row0 > 0) return Error("blk.3.ffn_up: row 9, column 2 is nan");
    return prune_rows_into(w.view(), Pattern{6, 8}, 0, slice);
  });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message(), "blk.3.ffn_up: row 9, column 2 is nan");
}

}  // namespace
}  // namespace nmkit
