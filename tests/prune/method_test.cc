// Method names and metric formulas (docs/design.md section 3).
#include <gtest/gtest.h>

#include <cmath>

#include "nmkit/metrics.h"
#include "nmkit/prune.h"

namespace nmkit {
namespace {

TEST(PruneMethod, ParsesTheThreeNamesAndRoundTrips) {
  for (PruneMethod m : {PruneMethod::Magnitude, PruneMethod::Gradient, PruneMethod::Wanda}) {
    auto parsed = parse_prune_method(prune_method_name(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  EXPECT_EQ(prune_method_name(PruneMethod::Wanda), "wanda");
}

TEST(PruneMethod, RejectsUnknownNamesQuotingThem) {
  for (const char* bad : {"", "Magnitude", "sparsegpt", "wanda ", "grad"}) {
    auto parsed = parse_prune_method(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    std::string quoted = "'";  // built piecewise: g++ 12 warns falsely (-Wrestrict) on "'" + s
    quoted += bad;
    quoted += '\'';
    EXPECT_NE(parsed.error().message().find(quoted), std::string::npos)
        << parsed.error().message();
  }
}

TEST(Metrics, FormulasFromSums) {
  PruneSums s;
  s.total_count = 8;
  s.pruned_count = 3;
  s.abs_kept = 10.0;
  s.abs_pruned = 2.0;
  s.sq_total = 40.0;
  s.sq_pruned = 4.0;
  const PruneMetrics m = metrics_from(s);
  EXPECT_EQ(m.total_count, 8);
  EXPECT_EQ(m.pruned_count, 3);
  EXPECT_DOUBLE_EQ(m.approximation_error, 2.0 / 8.0);
  EXPECT_DOUBLE_EQ(m.kept_magnitude_mean, 10.0 / 5.0);
  EXPECT_DOUBLE_EQ(m.pruned_magnitude_mean, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.sparsity_percent, 100.0 * 3.0 / 8.0);
  EXPECT_DOUBLE_EQ(m.relative_error, std::sqrt(4.0 / 40.0));
  EXPECT_DOUBLE_EQ(m.retained_l1, 10.0 / 12.0);
}

TEST(Metrics, EmptyAndAllZeroConventions) {
  const PruneMetrics empty = metrics_from(PruneSums{});
  EXPECT_EQ(empty.total_count, 0);
  EXPECT_EQ(empty.approximation_error, 0.0);
  EXPECT_EQ(empty.sparsity_percent, 0.0);
  EXPECT_EQ(empty.kept_magnitude_mean, 0.0);
  EXPECT_EQ(empty.pruned_magnitude_mean, 0.0);
  EXPECT_EQ(empty.relative_error, 0.0);
  EXPECT_EQ(empty.retained_l1, 1.0);

  PruneSums zeros;  // an all-zero W of 4 elements, half pruned
  zeros.total_count = 4;
  zeros.pruned_count = 2;
  const PruneMetrics z = metrics_from(zeros);
  EXPECT_EQ(z.relative_error, 0.0);
  EXPECT_EQ(z.retained_l1, 1.0);
  EXPECT_EQ(z.sparsity_percent, 50.0);

  PruneSums all_pruned;  // nothing kept: the kept mean is 0, not NaN
  all_pruned.total_count = 2;
  all_pruned.pruned_count = 2;
  all_pruned.abs_pruned = 3.0;
  all_pruned.sq_total = all_pruned.sq_pruned = 5.0;
  const PruneMetrics a = metrics_from(all_pruned);
  EXPECT_EQ(a.kept_magnitude_mean, 0.0);
  EXPECT_DOUBLE_EQ(a.pruned_magnitude_mean, 1.5);
  EXPECT_DOUBLE_EQ(a.relative_error, 1.0);
  EXPECT_DOUBLE_EQ(a.retained_l1, 0.0);
}

TEST(Metrics, AggregatesAddSumsNotMeans) {
  PruneSums a, b;
  a.total_count = 4;
  a.pruned_count = 2;
  a.abs_pruned = 4.0;
  a.abs_kept = 8.0;
  a.sq_total = 30.0;
  a.sq_pruned = 6.0;
  b.total_count = 12;
  b.pruned_count = 9;
  b.abs_pruned = 1.0;
  b.abs_kept = 2.0;
  b.sq_total = 3.0;
  b.sq_pruned = 0.5;
  PruneSums sum = a;
  sum += b;
  EXPECT_EQ(sum.total_count, 16);
  EXPECT_EQ(sum.pruned_count, 11);
  EXPECT_DOUBLE_EQ(sum.abs_pruned, 5.0);
  EXPECT_DOUBLE_EQ(sum.abs_kept, 10.0);
  EXPECT_DOUBLE_EQ(sum.sq_total, 33.0);
  EXPECT_DOUBLE_EQ(sum.sq_pruned, 6.5);
  const PruneMetrics m = metrics_from(sum);
  // Weighted by counts: (4 + 1) / 16, not the mean of 4/4 and 1/12.
  EXPECT_DOUBLE_EQ(m.approximation_error, 5.0 / 16.0);
  EXPECT_DOUBLE_EQ(m.pruned_magnitude_mean, 5.0 / 11.0);
  EXPECT_DOUBLE_EQ(m.kept_magnitude_mean, 10.0 / 5.0);
}

}  // namespace
}  // namespace nmkit
