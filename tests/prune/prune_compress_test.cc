// prune_compress (docs/design.md 2, "Pruning into a compressed format"): the bytes of
// compress_nm / compress_sparse24 of the pruned tensor converted to the packed dtype, row by row into
// a stacked tensor, whatever the dtypes, the tail and the kept zeros.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/prune.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// A weight with exact zeros of both signs among random values, so groups keep zeros (the fill rule
// then pads with the lowest zero positions) and some hold fewer non-zeros than `keep`.
Tensor weight_with_zeros(DType dtype, int64_t rows, int64_t K, uint64_t seed) {
  std::vector<float> v = test::random_floats(static_cast<size_t>(rows * K), seed);
  for (size_t i = 0; i < v.size(); ++i) {
    if (i % 7 == 3) v[i] = 0.0f;
    if (i % 11 == 5) v[i] = -0.0f;
    if (i % 13 == 0) v[i] = 1e-40f;  // an f32 subnormal: rounds to a bf16 subnormal or zero
  }
  return Tensor::from_f32(v, {rows, K}, dtype);
}

Tensor converted(const TensorView& t, DType dtype) {
  std::vector<float> f(static_cast<size_t>(t.numel()));
  convert_to_f32(t.dtype, t.data, f.data(), f.size());
  Tensor out = Tensor::empty(dtype, t.shape);
  convert_from_f32(dtype, f.data(), out.data(), f.size());
  return out;
}

// Rows [row0, row0 + rows) of a packed part equal to `expected`'s rows.
void expect_rows(const Tensor& got, int64_t row0, const Tensor& expected, const std::string& what) {
  const size_t row_bytes = expected.shape()[0] == 0 ? 0 : expected.nbytes() / static_cast<size_t>(expected.shape()[0]);
  ASSERT_EQ(got.nbytes() / static_cast<size_t>(got.shape()[0]), row_bytes) << what;
  EXPECT_EQ(std::memcmp(got.data() + static_cast<size_t>(row0) * row_bytes, expected.data(), expected.nbytes()), 0)
      << what;
}

// `dense` equal, value for value, to `parts` stacked by rows.
void expect_same_values(const Tensor& dense, const std::vector<const Tensor*>& parts, const std::string& what) {
  std::vector<float> got(static_cast<size_t>(dense.view().numel()));
  convert_to_f32(dense.dtype(), dense.data(), got.data(), got.size());
  size_t at = 0;
  for (const Tensor* part : parts) {
    std::vector<float> want(static_cast<size_t>(part->view().numel()));
    convert_to_f32(part->dtype(), part->data(), want.data(), want.size());
    for (size_t i = 0; i < want.size(); ++i, ++at) {
      ASSERT_LT(at, got.size()) << what;
      ASSERT_EQ(got[at], want[i]) << what << " element " << at;
    }
  }
  EXPECT_EQ(at, got.size()) << what;
}

struct StackCase {
  int64_t rows_a, rows_b, K;
};

TEST(PruneCompress, StackedRowsEqualCompressOfPrunedConverted) {
  const std::vector<StackCase> cases = {{5, 3, 37}, {17, 9, 128}, {1, 40, 200}, {33, 2, 64}, {4, 4, 3}};
  const std::vector<Pattern> patterns = {{6, 8}, {4, 8}, {2, 4}, {1, 4}, {3, 7}, {14, 16}};
  uint64_t seed = 100;
  {
    for (const StackCase& c : cases) {
      for (DType from : {DType::F32, DType::F16, DType::BF16}) {
        for (DType to : {DType::F32, DType::BF16}) {
          for (const Pattern& p : patterns) {
            const Tensor a = weight_with_zeros(from, c.rows_a, c.K, ++seed);
            const Tensor b = weight_with_zeros(from, c.rows_b, c.K, ++seed);
            const std::string what = std::string(dtype_name(from)) + "->" + std::string(dtype_name(to)) + " " +
                                     p.str() + " K " + std::to_string(c.K);
            auto pa = prune(a.view(), p, PruneMethod::Magnitude);
            auto pb = prune(b.view(), p, PruneMethod::Magnitude);
            ASSERT_TRUE(pa.ok() && pb.ok());
            const Tensor ca = converted(pa->pruned.view(), to), cb = converted(pb->pruned.view(), to);

            NMPacked stacked = empty_nm(to, c.rows_a + c.rows_b, c.K, p);
            // a with the metrics' sums (they are prune's), b without (the bytes do not depend on it).
            PruneSums sums;
            ASSERT_TRUE(prune_compress(a.view(), p, PruneMethod::Magnitude, {}, stacked, 0, &sums, "a").ok()) << what;
            ASSERT_TRUE(prune_compress(b.view(), p, PruneMethod::Magnitude, {}, stacked, c.rows_a, nullptr, "b").ok())
                << what;
            EXPECT_EQ(sums.total_count, pa->sums.total_count) << what;
            EXPECT_EQ(sums.pruned_count, pa->sums.pruned_count) << what;
            EXPECT_EQ(sums.abs_kept, pa->sums.abs_kept) << what;
            EXPECT_EQ(sums.abs_pruned, pa->sums.abs_pruned) << what;
            EXPECT_EQ(sums.sq_total, pa->sums.sq_total) << what;
            EXPECT_EQ(sums.sq_pruned, pa->sums.sq_pruned) << what;
            auto ea = compress_nm(ca.view(), p), eb = compress_nm(cb.view(), p);
            ASSERT_TRUE(ea.ok() && eb.ok()) << what;
            expect_rows(stacked.values, 0, ea->values, what + " values a");
            expect_rows(stacked.values, c.rows_a, eb->values, what + " values b");
            expect_rows(stacked.mask, 0, ea->mask, what + " mask a");
            expect_rows(stacked.mask, c.rows_a, eb->mask, what + " mask b");
            EXPECT_TRUE(validate(stacked, "stacked").ok()) << what;
            // Independently of the row packer that compress_nm shares: the stacked tensor decompresses
            // to the pruned, converted rows (as values: a kept -0 outside the mask comes back +0).
            expect_same_values(decompress(stacked), {&ca, &cb}, what);

            if (p.keep != 2 || p.group != 4) continue;
            Sparse24 s24 = empty_sparse24(to, c.rows_a + c.rows_b, c.K);
            ASSERT_TRUE(prune_compress(a.view(), p, PruneMethod::Magnitude, {}, s24, 0).ok()) << what;
            ASSERT_TRUE(prune_compress(b.view(), p, PruneMethod::Magnitude, {}, s24, c.rows_a).ok()) << what;
            auto fa = compress_sparse24(ca.view()), fb = compress_sparse24(cb.view());
            ASSERT_TRUE(fa.ok() && fb.ok()) << what;
            expect_rows(s24.values, 0, fa->values, what + " sparse24 values a");
            expect_rows(s24.values, c.rows_a, fb->values, what + " sparse24 values b");
            expect_rows(s24.meta, 0, fa->meta, what + " sparse24 meta a");
            expect_rows(s24.meta, c.rows_a, fb->meta, what + " sparse24 meta b");
          }
        }
      }
    }
  }
}

// Wanda scores go through as prune's: the same rows as compress_nm of prune with the same norms.
TEST(PruneCompress, WandaScoresAsPrune) {
  const Tensor w = weight_with_zeros(DType::BF16, 12, 72, 7);
  const Tensor norms = test::random_tensor(DType::F32, {72}, 8, 0.0f, 4.0f);
  const TensorView nv = norms.view();
  ScoreInputs in;
  in.act_norms = &nv;
  auto pruned = prune(w.view(), Pattern{6, 8}, PruneMethod::Wanda, in);
  ASSERT_TRUE(pruned.ok());
  auto expected = compress_nm(pruned->pruned.view(), Pattern{6, 8});
  ASSERT_TRUE(expected.ok());
  NMPacked got = empty_nm(DType::BF16, 12, 72, Pattern{6, 8});
  ASSERT_TRUE(prune_compress(w.view(), Pattern{6, 8}, PruneMethod::Wanda, in, got, 0).ok());
  expect_rows(got.values, 0, expected->values, "values");
  expect_rows(got.mask, 0, expected->mask, "mask");
}

std::string error_of(const Status& s) {
  EXPECT_FALSE(s.ok());
  return s.ok() ? std::string() : s.error().message();
}

TEST(PruneCompress, BadInputsNameTheTensor) {
  std::vector<float> v = test::random_floats(6 * 16, 9);
  v[4 * 16 + 9] = std::numeric_limits<float>::quiet_NaN();
  const Tensor bad = Tensor::from_f32(v, {6, 16}, DType::BF16);
  NMPacked out = empty_nm(DType::BF16, 8, 16, Pattern{6, 8});
  const std::string nan = error_of(prune_compress(bad.view(), Pattern{6, 8}, PruneMethod::Magnitude, {}, out, 0, nullptr, "blk.0.attn_q.weight"));
  for (const char* part : {"blk.0.attn_q.weight", "row 4", "column 9", "nan"}) {
    EXPECT_NE(nan.find(part), std::string::npos) << part << " not in: " << nan;
  }
  const Tensor w = test::random_tensor(DType::BF16, {6, 16}, 10);
  EXPECT_NE(error_of(prune_compress(w.view(), Pattern{6, 8}, PruneMethod::Magnitude, {}, out, 3, nullptr, "w")).find("do not fit"),
            std::string::npos);
  EXPECT_NE(error_of(prune_compress(w.view(), Pattern{6, 8}, PruneMethod::Magnitude, {}, out, -1, nullptr, "w")).find("do not fit"),
            std::string::npos);
  NMPacked wide = empty_nm(DType::BF16, 6, 24, Pattern{6, 8});
  EXPECT_NE(error_of(prune_compress(w.view(), Pattern{6, 8}, PruneMethod::Magnitude, {}, wide, 0, nullptr, "w")).find("16 columns"),
            std::string::npos);
  EXPECT_NE(error_of(prune_compress(w.view(), Pattern{4, 8}, PruneMethod::Magnitude, {}, out, 0, nullptr, "w")).find("does not match"),
            std::string::npos);
  Sparse24 s24 = empty_sparse24(DType::BF16, 6, 16);
  EXPECT_NE(error_of(prune_compress(w.view(), Pattern{6, 8}, PruneMethod::Magnitude, {}, s24, 0, nullptr, "w")).find("2:4"),
            std::string::npos);
  // A packed tensor made with an impossible pattern (empty_nm does not check it): an error, from the
  // fused kernel's path as from the general one.
  NMPacked impossible = empty_nm(DType::BF16, 6, 16, Pattern{8, 8});
  EXPECT_NE(error_of(prune_compress(w.view(), Pattern{8, 8}, PruneMethod::Magnitude, {}, impossible, 0, nullptr, "w"))
                .find("invalid pattern '8:8'"),
            std::string::npos);
}

}  // namespace
}  // namespace nmkit
