// nmkit's cutlass_sm80 layout (include/nmkit/cutlass_sm80.h) against CUTLASS's own host code, compiled
// by nvcc as a host program (no GPU): cutlass::reorder_meta on the sparse24 metadata words gives the
// same bytes as to_cutlass_sm80, and cutlass::uncompress of the values with those words gives back
// nmkit's dense matrix. Both element widths (16-bit: F16, BF16; 8-bit: I8, E4M3), random and awkward
// sizes, groups with zero, one and two non-zeros; from_cutlass_sm80 restores the sparse24 bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "nmkit/cutlass_sm80.h"
#include "nmkit/format.h"
#include "nmkit/quant.h"
#include "tests/cuda/cutlass_host.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// A [rows, K] f32 weight whose groups hold 0, 1 or 2 non-zeros (chosen per group at random).
Tensor sparse_dense(int64_t rows, int64_t K, uint64_t seed) {
  std::vector<float> v = test::random_floats(static_cast<size_t>(rows * K), seed, -2.0f, 2.0f);
  std::mt19937_64 rng(seed ^ 0x5eed);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g * 4 < K; ++g) {
      const int keep = static_cast<int>(rng() % 3);
      int kept = 0;
      for (int64_t k = g * 4; k < std::min(K, g * 4 + 4); ++k) {
        const bool take = kept < keep && rng() % 2 == 0;
        kept += take;
        if (!take) v[static_cast<size_t>(r * K + k)] = 0.0f;
      }
    }
  }
  return Tensor::from_f32(v, {rows, K});
}

template <class Value, class Word>
void check(const Sparse24& s, const std::string& what) {
  SCOPED_TRACE(what);
  auto layout = to_cutlass_sm80(s, what);
  ASSERT_TRUE(layout.ok()) << layout.error().message();
  const Status valid = validate(*layout, what);
  ASSERT_TRUE(valid.ok()) << valid.error().message();
  const std::vector<Value> dense = test::cutlass_dense<Value, Word>(s, *layout);
  // nmkit's dense matrix (decompress copies elements by size, so codes decompress as well).
  const Tensor want = decompress(s);
  const int64_t K_pad = layout->K_pad();
  int64_t nonzero = 0;
  for (int64_t r = 0; r < layout->rows_pad(); ++r) {
    for (int64_t k = 0; k < K_pad; ++k) {
      Value expected{};
      if (r < s.rows() && k < s.K) std::memcpy(&expected, want.data() + (r * s.K + k) * sizeof(Value), sizeof(Value));
      const Value got = dense[static_cast<size_t>(r * K_pad + k)];
      ASSERT_EQ(got, expected) << "row " << r << ", column " << k;
      nonzero += got != 0;
    }
  }
  if (s.rows() * s.K >= 64) EXPECT_GT(nonzero, 0);
  auto back = from_cutlass_sm80(*layout, what);
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_EQ(back->values.shape(), s.values.shape());
  ASSERT_EQ(0, std::memcmp(back->values.data(), s.values.data(), s.values.nbytes()));
  ASSERT_EQ(0, std::memcmp(back->meta.data(), s.meta.data(), s.meta.nbytes()));
}

TEST(CutlassSm80Oracle, ReorderAndUncompressAgreeWithCutlass) {
  std::vector<int64_t> row_counts = test::awkward_sizes();
  row_counts.insert(row_counts.end(), {32, 48, 64, 96});
  uint64_t seed = 80;
  for (const int64_t rows : row_counts) {
    for (const int64_t K : test::awkward_sizes()) {
      if (rows * K > 300000) continue;  // 4097 x 4097 adds nothing the smaller shapes do not test
      SCOPED_TRACE(test::seed_trace(++seed) + " rows " + std::to_string(rows) + " K " + std::to_string(K));
      const Tensor w = sparse_dense(rows, K, seed);
      auto f32 = compress_sparse24(w.view());
      ASSERT_TRUE(f32.ok());
      for (const DType d16 : {DType::F16, DType::BF16}) {
        auto s16 = compress_sparse24(Tensor::from_f32(std::vector<float>(w.as<float>(), w.as<float>() + rows * K),
                                                      {rows, K}, d16).view());
        ASSERT_TRUE(s16.ok());
        check<uint16_t, uint16_t>(*s16, std::string(dtype_name(d16)));
      }
      for (const QuantType type : {QuantType::Int8, QuantType::E4M3}) {
        auto q = quantize_weights(*f32, type);
        ASSERT_TRUE(q.ok()) << q.error().message();
        check<uint8_t, uint32_t>(q->packed, std::string(quant_type_name(type)));
      }
    }
  }
}

TEST(CutlassSm80Oracle, F32IsRefused) {
  auto s = compress_sparse24(sparse_dense(16, 16, 1).view());
  ASSERT_TRUE(s.ok());
  auto layout = to_cutlass_sm80(*s, "w");
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.error().message().find("F32"), std::string::npos) << layout.error().message();
}

}  // namespace
}  // namespace nmkit
