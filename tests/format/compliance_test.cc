// Compliance (docs/design.md 2, last rule): at most `keep` non-zeros in every group, tail included;
// "non-zero" means != 0, so -0 is zero and NaN is not.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/prune.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

TEST(FindViolation, NegativeZeroIsZeroNaNAndInfAreNonZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    const Tensor zeros = Tensor::from_f32({-0.0f, 5.0f, -0.0f, 3.0f}, {1, 4}, dtype);
    EXPECT_FALSE(find_violation(zeros.view(), Pattern{2, 4}).has_value());
    const Tensor with_nan = Tensor::from_f32({nan, 5.0f, -0.0f, 3.0f}, {1, 4}, dtype);
    auto v = find_violation(with_nan.view(), Pattern{2, 4});
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->nonzeros, 3);
    const Tensor with_inf = Tensor::from_f32({0.0f, -inf, 1e-3f, 0.0f}, {1, 4}, dtype);
    EXPECT_EQ(find_violation(with_inf.view(), Pattern{1, 4}).value().nonzeros, 2);
  }
}

TEST(FindViolation, FirstInRowMajorOrderTailIncluded) {
  // 3 rows of K = 10 under 2:4: groups [0,4), [4,8), tail [8,10).
  std::vector<float> v(30, 0.0f);
  v[2 * 10 + 0] = v[2 * 10 + 1] = v[2 * 10 + 2] = 1.0f;  // row 2, group 0: 3 non-zeros
  v[1 * 10 + 8] = v[1 * 10 + 9] = 1.0f;                  // row 1 tail: 2, allowed
  const Tensor t = Tensor::from_f32(v, {3, 10});
  auto first = find_violation(t.view(), Pattern{2, 4});
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->row, 2);
  EXPECT_EQ(first->group, 0);
  EXPECT_EQ(first->nonzeros, 3);
  // Under 1:4 the row-1 tail (2 non-zeros in 2 real elements) comes first.
  auto tail = find_violation(t.view(), Pattern{1, 4});
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(tail->row, 1);
  EXPECT_EQ(tail->group, 2);
  EXPECT_EQ(tail->nonzeros, 2);
}

TEST(FindViolation, IntegerAndOtherDtypesCountNonZeroBits) {
  const std::vector<int32_t> ints{0, 7, -1, 0, 0, 0, 0, 9};
  const TensorView view{DType::I32, {2, 4}, reinterpret_cast<const std::byte*>(ints.data())};
  EXPECT_FALSE(find_violation(view, Pattern{2, 4}).has_value());
  EXPECT_EQ(find_violation(view, Pattern{1, 4}).value().nonzeros, 2);
  const Tensor empty = Tensor::zeros(DType::F32, {0, 4});
  EXPECT_FALSE(find_violation(empty.view(), Pattern{1, 4}).has_value());
}

// Pruning always produces a compliant tensor, and sparsest_compliant names its pattern (or a
// sparser one it happens to satisfy).
TEST(SparsestCompliant, RecognisesPrunedTensors) {
  const std::vector<Pattern> candidates{{1, 4}, {2, 4}, {2, 8}, {4, 8}, {4, 6}, {6, 8}, {8, 10}, {14, 16}};
  uint64_t seed = 31;
  for (const Pattern& p : candidates) {
    for (int64_t K : {int64_t{16}, int64_t{100}, int64_t{4097}}) {
      SCOPED_TRACE(test::seed_trace(seed));
      const Tensor w = test::random_tensor(DType::BF16, {5, K}, seed++);
      auto pruned = prune(w.view(), p, PruneMethod::Magnitude);
      ASSERT_TRUE(pruned.ok());
      auto found = sparsest_compliant(pruned->pruned.view(), candidates);
      ASSERT_TRUE(found.has_value()) << p.str();
      EXPECT_EQ(*found, p) << "pruned to " << p.str() << " K=" << K;
    }
  }
  const Tensor dense = test::random_tensor(DType::F32, {4, 64}, 99);
  EXPECT_FALSE(sparsest_compliant(dense.view(), candidates).has_value());
}

TEST(SparsestCompliant, EqualRatiosPreferTheSmallerGroup) {
  const Tensor zeros = Tensor::zeros(DType::F16, {2, 32});
  const std::vector<Pattern> ties{{4, 8}, {2, 8}, {1, 4}, {2, 4}};
  EXPECT_EQ(sparsest_compliant(zeros.view(), ties), (Pattern{1, 4}));
  // Exactly 2:4 (and so 4:8): both have ratio 1/2; 2:4 is the stronger statement.
  const Tensor t = Tensor::from_f32({1, 0, 2, 0, 0, 3, 4, 0}, {1, 8});
  EXPECT_EQ(sparsest_compliant(t.view(), {Pattern{4, 8}, Pattern{2, 4}, Pattern{6, 8}}),
            (Pattern{2, 4}));
  EXPECT_EQ(sparsest_compliant(t.view(), {}), std::nullopt);
}

}  // namespace
}  // namespace nmkit

namespace nmkit {
namespace {

// Rows are scanned in parallel; the violation reported is still the first in row-major order.
TEST(FindViolation, FirstViolationWhateverTheThreadSplit) {
  const int64_t rows = 3000, K = 40;
  std::vector<float> v(rows * K, 0.0f);
  const auto spoil = [&](int64_t r, int64_t g, int n) {
    for (int j = 0; j < n; ++j) v[r * K + g * 4 + j] = 1.0f;
  };
  spoil(2900, 1, 4);
  spoil(1600, 9, 3);
  spoil(1500, 2, 4);
  spoil(1500, 7, 3);
  const Tensor t = Tensor::from_f32(v, {rows, K}, DType::BF16);
  for (int rep = 0; rep < 5; ++rep) {
    auto first = find_violation(t.view(), Pattern{2, 4});
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->row, 1500);
    EXPECT_EQ(first->group, 2);
    EXPECT_EQ(first->nonzeros, 4);
    auto packed = compress_sparse24(t.view(), "w");
    ASSERT_FALSE(packed.ok());
    EXPECT_NE(packed.error().message().find("row 1500, group 2 has 4 non-zeros"), std::string::npos)
        << packed.error().message();
    auto nm = compress_nm(t.view(), Pattern{2, 4}, "w");
    ASSERT_FALSE(nm.ok());
    EXPECT_NE(nm.error().message().find("row 1500, group 2 has 4 non-zeros"), std::string::npos)
        << nm.error().message();
  }
}

}  // namespace
}  // namespace nmkit
