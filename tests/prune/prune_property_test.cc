// Property tests on random tensors of awkward shapes (docs/design.md 10.5): every dtype, pattern and
// method agrees bit for bit with the oracle, every element of the output is written, and the
// metrics match a plain float64 computation to 1e-9 relative.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/prune.h"
#include "tests/prune/oracle.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

using test::oracle_kept;
using test::oracle_masked;
using test::oracle_metrics;

const std::vector<Pattern>& patterns() {
  static const std::vector<Pattern> p{{2, 4}, {4, 8}, {6, 8}, {1, 4}, {3, 7}, {1, 2}, {15, 16}};
  return p;
}

const std::vector<std::pair<int64_t, int64_t>>& shapes() {
  static const std::vector<std::pair<int64_t, int64_t>> s{
      {1, 1}, {1, 3}, {3, 15}, {17, 16}, {2, 17}, {100, 100}, {7, 1000}, {1, 4097}};
  return s;
}

DType other_dtype(DType d, int shift) {
  static const DType all[3] = {DType::F32, DType::F16, DType::BF16};
  for (int i = 0; i < 3; ++i) {
    if (all[i] == d) return all[(i + shift) % 3];
  }
  return d;
}

TEST(PruneProperty, RandomTensorsMatchOracleBitForBitWithMetrics) {
  uint64_t seed = 20240601;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (const Pattern& p : patterns()) {
      for (PruneMethod method :
           {PruneMethod::Magnitude, PruneMethod::Gradient, PruneMethod::Wanda}) {
        for (auto [rows, K] : shapes()) {
          for (int dist = 0; dist < 2; ++dist) {
            ++seed;
            SCOPED_TRACE(test::seed_trace(seed));
            SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + p.str() + " " +
                         std::string(prune_method_name(method)) + " [" + std::to_string(rows) +
                         ", " + std::to_string(K) + "] dist " + std::to_string(dist));
            const size_t n = static_cast<size_t>(rows * K);
            // dist 0: continuous values; dist 1: small integers, so scores tie often.
            const std::vector<float> w0 =
                dist == 0 ? test::random_floats(n, seed, -2.0f, 2.0f)
                          : test::random_small_ints(n, seed, -4, 4);
            const Tensor w = Tensor::from_f32(w0, {rows, K}, dtype);
            const Tensor grad = Tensor::from_f32(
                dist == 0 ? test::random_floats(n, seed + 1) : test::random_small_ints(n, seed + 1, -2, 2),
                {rows, K}, other_dtype(dtype, 1));
            const Tensor norms = Tensor::from_f32(
                dist == 0 ? test::random_floats(K, seed + 2, 0.0f, 3.0f)
                          : test::random_small_ints(K, seed + 2, 0, 3),
                {K}, other_dtype(dtype, 2));
            const TensorView gv = grad.view(), nv = norms.view();
            ScoreInputs in;
            in.gradient = &gv;
            in.act_norms = &nv;

            // Poisoned destination: an element the library forgets to write cannot match.
            std::vector<std::byte> dst(w.nbytes(), std::byte{0xA5});
            auto sums = prune_into(w.view(), p, method, in, dst.data(), "prop");
            ASSERT_TRUE(sums.ok()) << sums.error().message();

            const std::vector<float> wf = w.to_f32();
            const std::vector<float> gf = grad.to_f32();
            const std::vector<float> af = norms.to_f32();
            const auto kept = oracle_kept(wf, rows, K, p, method, &gf, &af);
            const Tensor expected = oracle_masked(w.view(), kept);
            ASSERT_EQ(std::memcmp(dst.data(), expected.data(), expected.nbytes()), 0);
            test::expect_metrics(metrics_from(*sums), oracle_metrics(wf, kept));

            const TensorView out{dtype, {rows, K}, dst.data()};
            EXPECT_FALSE(find_violation(out, p).has_value());
          }
        }
      }
    }
  }
}

// The sums do not depend on how rows are split among threads: pruning row by row and adding the
// per-row sums in row order gives the same bits as one call on the whole tensor.
TEST(PruneProperty, SumsAreRowOrderedAndDeterministic) {
  const uint64_t seed = 77;
  SCOPED_TRACE(test::seed_trace(seed));
  const int64_t rows = 301, K = 1037;
  const Tensor w = test::random_tensor(DType::BF16, {rows, K}, seed, -3.0f, 3.0f);
  auto whole = prune(w.view(), Pattern{6, 8}, PruneMethod::Magnitude);
  ASSERT_TRUE(whole.ok());
  PruneSums by_rows;
  const size_t row_bytes = static_cast<size_t>(K) * dtype_size(w.dtype());
  for (int64_t r = 0; r < rows; ++r) {
    const TensorView row{w.dtype(), {1, K}, w.data() + r * row_bytes};
    auto one = prune(row, Pattern{6, 8}, PruneMethod::Magnitude);
    ASSERT_TRUE(one.ok());
    by_rows += one->sums;
    ASSERT_EQ(std::memcmp(one->pruned.data(), whole->pruned.data() + r * row_bytes, row_bytes), 0);
  }
  EXPECT_EQ(by_rows.total_count, whole->sums.total_count);
  EXPECT_EQ(by_rows.pruned_count, whole->sums.pruned_count);
  EXPECT_EQ(by_rows.abs_kept, whole->sums.abs_kept);
  EXPECT_EQ(by_rows.abs_pruned, whole->sums.abs_pruned);
  EXPECT_EQ(by_rows.sq_total, whole->sums.sq_total);
  EXPECT_EQ(by_rows.sq_pruned, whole->sums.sq_pruned);
  for (int rep = 0; rep < 3; ++rep) {
    auto again = prune(w.view(), Pattern{6, 8}, PruneMethod::Magnitude);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->sums.abs_pruned, whole->sums.abs_pruned);
    EXPECT_EQ(again->sums.sq_pruned, whole->sums.sq_pruned);
  }
}

// Kept elements keep their exact bits (-0, subnormals, the largest finite values); pruned ones are
// +0 whatever their sign.
TEST(PruneProperty, KeptBitsAreExactAndPrunedArePlusZero) {
  const float sub = 1e-40f;  // f32 subnormal
  const float big = 3.0e38f;
  const Tensor w = Tensor::from_f32({-0.0f, sub, -big, -0.0f, -2.0f, -0.0f, 0.0f, -3.0f}, {1, 8});
  auto got = prune(w.view(), Pattern{2, 4}, PruneMethod::Magnitude);
  ASSERT_TRUE(got.ok());
  const auto* bits = got->pruned.as<uint32_t>();
  const uint32_t expect[8] = {0u, std::bit_cast<uint32_t>(sub), std::bit_cast<uint32_t>(-big), 0u,
                              std::bit_cast<uint32_t>(-2.0f), 0u, 0u,
                              std::bit_cast<uint32_t>(-3.0f)};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(bits[i], expect[i]) << i;

  // A group of zeros keeps its lowest indices, -0 bits included.
  const Tensor z = Tensor::from_f32({-0.0f, -0.0f, -0.0f, -0.0f}, {1, 4});
  auto gz = prune(z.view(), Pattern{2, 4}, PruneMethod::Magnitude);
  ASSERT_TRUE(gz.ok());
  const auto* zb = gz->pruned.as<uint32_t>();
  EXPECT_EQ(zb[0], 0x80000000u);
  EXPECT_EQ(zb[1], 0x80000000u);
  EXPECT_EQ(zb[2], 0u);
  EXPECT_EQ(zb[3], 0u);
}

// Scores are float32 products, not exact ones: |w * g| rounds once, so two different exact products
// that round to the same float tie and fall through to |w|.
TEST(PruneProperty, GradientScoresRoundInFloat32) {
  // 1 + 2^-23 and 1 - 2^-24 times 1 + 2^-24 differ exactly but are separated by rounding rules;
  // the oracle computes the same float32 expressions, and the library must agree with it.
  const float a = 1.0f + 0x1p-23f, b = 1.0f - 0x1p-24f, c = 1.0f + 0x1p-22f;
  const std::vector<float> wv{a, b, c, 1.0f, b, a, 1.0f, c};
  const std::vector<float> gv{b, a, 1.0f - 0x1p-23f, c, 1.0f, 1.0f, a, b};
  const Tensor w = Tensor::from_f32(wv, {2, 4});
  const Tensor g = Tensor::from_f32(gv, {2, 4});
  const TensorView gview = g.view();
  ScoreInputs in;
  in.gradient = &gview;
  for (int keep = 1; keep <= 3; ++keep) {
    auto got = prune(w.view(), Pattern{keep, 4}, PruneMethod::Gradient, in);
    ASSERT_TRUE(got.ok());
    const auto kept = test::oracle_kept(wv, 2, 4, Pattern{keep, 4}, PruneMethod::Gradient, &gv);
    EXPECT_EQ(test::first_bit_difference(got->pruned, oracle_masked(w.view(), kept)), -1) << keep;
  }
}

// Norms are L2 norms, never negative (a negative one is an Error, bad_input_test.cc); zero and -0
// norms must order scores as floats do: -0 equal to +0, the tie decided by |w|.
TEST(PruneProperty, WandaWithZeroAndSignedZeroNorms) {
  const uint64_t seed = 8080;
  SCOPED_TRACE(test::seed_trace(seed));
  const int64_t rows = 37, K = 203;
  const std::vector<float> wv = test::random_small_ints(rows * K, seed, -3, 3);
  std::vector<float> av = test::random_small_ints(K, seed + 1, 0, 2);
  for (int64_t k = 0; k < K; k += 5) av[k] = -0.0f;
  const Tensor w = Tensor::from_f32(wv, {rows, K});
  const Tensor a = Tensor::from_f32(av, {K});
  const TensorView aview = a.view();
  ScoreInputs in;
  in.act_norms = &aview;
  for (const Pattern& p : patterns()) {
    auto got = prune(w.view(), p, PruneMethod::Wanda, in);
    ASSERT_TRUE(got.ok());
    const auto kept = oracle_kept(wv, rows, K, p, PruneMethod::Wanda, nullptr, &av);
    EXPECT_EQ(test::first_bit_difference(got->pruned, oracle_masked(w.view(), kept)), -1) << p.str();
  }
}

TEST(PruneProperty, EmptyTensorsGiveEmptySums) {
  for (Shape shape : {Shape{0, 8}, Shape{5, 0}}) {
    const Tensor w = Tensor::zeros(DType::F32, shape);
    auto got = prune(w.view(), Pattern{2, 4}, PruneMethod::Magnitude);
    ASSERT_TRUE(got.ok()) << got.error().message();
    EXPECT_EQ(got->pruned.shape(), shape);
    EXPECT_EQ(got->sums.total_count, 0);
    EXPECT_EQ(got->sums.pruned_count, 0);
  }
}

}  // namespace
}  // namespace nmkit
