// Checked size arithmetic (issue 13 W2): shapes from untrusted headers such as [2^32, 2^31, 0]
// passed the reader's uint64 check, then shape_numel multiplied in int64 (signed overflow).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "nmkit/pattern.h"
#include "nmkit/tensor.h"

namespace nmkit {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(CheckedSizes, MulAndAddRefuseOverflowAndNegatives) {
  EXPECT_EQ(checked_mul(0, kMax), 0);
  EXPECT_EQ(checked_mul(3, 5), 15);
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_EQ(checked_mul(int64_t{1} << 32, int64_t{1} << 31), std::nullopt);  // 2^63
  EXPECT_EQ(checked_mul(kMax, 2), std::nullopt);
  EXPECT_EQ(checked_mul(-1, 2), std::nullopt);
  EXPECT_EQ(checked_add(kMax - 1, 1), kMax);
  EXPECT_EQ(checked_add(kMax, 1), std::nullopt);
  EXPECT_EQ(checked_add(-1, 1), std::nullopt);
}

TEST(CheckedSizes, NumelOfHostileShapes) {
  const int64_t p31 = int64_t{1} << 31, p32 = int64_t{1} << 32;
  // An empty dimension anywhere makes 0, whatever the product of the others would be.
  EXPECT_EQ(checked_numel({p32, p31, 0}), 0);
  EXPECT_EQ(shape_numel({p32, p31, 0}), 0);
  EXPECT_EQ(checked_numel({p32, p32, 0}), 0);
  EXPECT_EQ(checked_numel({0, kMax, kMax}), 0);
  // Products past int64 are refused; before the fix [2^32, 2^32] wrapped to 0 and [2^62, 4] too,
  // so a 2^64-element tensor looked empty.
  EXPECT_EQ(checked_numel({p32, p32}), std::nullopt);
  EXPECT_EQ(shape_numel({p32, p32}), -1);
  EXPECT_EQ(shape_numel({int64_t{1} << 62, 4}), -1);
  EXPECT_EQ(shape_numel({3, -2}), -1);
  EXPECT_EQ(checked_numel({}), 1);  // a scalar
  EXPECT_EQ(checked_numel({p32, p31 - 1}), p32 * (p31 - 1));
  // Bytes: numel fits but numel * element size does not.
  EXPECT_EQ(checked_nbytes({int64_t{1} << 61}, DType::F32), std::nullopt);
  EXPECT_EQ(checked_nbytes({int64_t{1} << 60}, DType::F32), int64_t{1} << 62);
  EXPECT_EQ(checked_nbytes({p32, p31, 0}, DType::F64), 0);
  const TensorView empty{DType::F32, {p32, p31, 0}, nullptr};
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.nbytes(), 0u);
}

TEST(CheckedSizes, PatternGroupsDoNotOverflowNearInt64Max) {
  // (K + group - 1) / group wrapped for K near 2^63.
  const Pattern p{2, 4};
  EXPECT_EQ(p.groups(kMax), kMax / 4 + 1);
  EXPECT_EQ(p.groups(0), 0);
  EXPECT_EQ(p.groups(4), 1);
  EXPECT_EQ(p.groups(5), 2);
  EXPECT_EQ((Pattern{3, 7}.groups(kMax)), kMax / 7 + (kMax % 7 != 0 ? 1 : 0));
}

}  // namespace
}  // namespace nmkit
