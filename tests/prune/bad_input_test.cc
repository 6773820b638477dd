// Bad inputs (docs/design.md 2 "Bad values" and issue 2 "Errors"): each is an Error whose message names
// the tensor, the row and column, and the value.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "nmkit/prune.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

std::string error_of(const Result<PruneResult>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string() : r.error().message();
}

TEST(PruneBadInput, NaNWeightNamesTensorRowColumnValue) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    std::vector<float> v = test::random_floats(5 * 11, 1);
    v[3 * 11 + 7] = kNaN;
    const Tensor w = Tensor::from_f32(v, {5, 11}, dtype);
    for (PruneMethod m : {PruneMethod::Magnitude}) {
      const std::string msg = error_of(prune(w.view(), Pattern{2, 4}, m, {}, "layers.0.q_proj"));
      expect_mentions(msg, {"layers.0.q_proj", "weight", "row 3", "column 7", "nan"});
    }
  }
}

TEST(PruneBadInput, InfinitiesInWeightAreErrorsToo) {
  std::vector<float> v(4 * 8, 1.0f);
  v[2 * 8 + 5] = -kInf;
  const Tensor w = Tensor::from_f32(v, {4, 8});
  expect_mentions(error_of(prune(w.view(), Pattern{4, 8}, PruneMethod::Magnitude, {}, "w")),
                  {"'w'", "row 2", "column 5", "-inf"});
}

TEST(PruneBadInput, InfGradientNamesTensorRowColumnValue) {
  const Tensor w = test::random_tensor(DType::BF16, {6, 9}, 2);
  std::vector<float> g = test::random_floats(6 * 9, 3);
  g[4 * 9 + 8] = kInf;
  const Tensor grad = Tensor::from_f32(g, {6, 9}, DType::F16);
  const TensorView gv = grad.view();
  ScoreInputs in;
  in.gradient = &gv;
  expect_mentions(error_of(prune(w.view(), Pattern{2, 4}, PruneMethod::Gradient, in, "mlp.up")),
                  {"'mlp.up'", "gradient", "row 4", "column 8", "inf"});
}

TEST(PruneBadInput, NaNNormNamesTensorColumnValue) {
  const Tensor w = test::random_tensor(DType::F32, {3, 10}, 4);
  std::vector<float> a(10, 1.0f);
  a[6] = kNaN;
  const Tensor norms = Tensor::from_f32(a, {10}, DType::BF16);
  const TensorView nv = norms.view();
  ScoreInputs in;
  in.act_norms = &nv;
  expect_mentions(error_of(prune(w.view(), Pattern{1, 4}, PruneMethod::Wanda, in, "attn.o")),
                  {"'attn.o'", "act_norms", "column 6", "nan"});
}

// Many rows, so that the work is split among threads: the error reported is the first bad value in
// row-major order, whichever thread finds it.
TEST(PruneBadInput, ReportsTheFirstBadValueInRowMajorOrder) {
  const int64_t rows = 4000, K = 64;
  std::vector<float> v = test::random_floats(rows * K, 5);
  v[3900 * K + 1] = kNaN;
  v[2500 * K + 60] = kInf;
  v[2500 * K + 61] = kNaN;
  v[10 * K + 63] = -kInf;  // the first
  const Tensor w = Tensor::from_f32(v, {rows, K});
  for (int rep = 0; rep < 5; ++rep) {
    expect_mentions(error_of(prune(w.view(), Pattern{2, 4}, PruneMethod::Magnitude, {}, "big")),
                    {"row 10,", "column 63", "-inf"});
  }
  // The weight comes before the gradient at one position, and an earlier column of the gradient
  // before a later one of the weight.
  std::vector<float> g(rows * K, 1.0f);
  g[10 * K + 62] = kNaN;
  const Tensor grad = Tensor::from_f32(g, {rows, K});
  const TensorView gv = grad.view();
  ScoreInputs in;
  in.gradient = &gv;
  expect_mentions(error_of(prune(w.view(), Pattern{2, 4}, PruneMethod::Gradient, in, "big")),
                  {"gradient", "row 10,", "column 62", "nan"});
  g[10 * K + 62] = 1.0f;
  g[10 * K + 63] = kNaN;
  const Tensor grad2 = Tensor::from_f32(g, {rows, K});
  const TensorView gv2 = grad2.view();
  in.gradient = &gv2;
  expect_mentions(error_of(prune(w.view(), Pattern{2, 4}, PruneMethod::Gradient, in, "big")),
                  {"weight", "row 10,", "column 63", "-inf"});
}

TEST(PruneBadInput, ShapeAndDtypeMismatches) {
  const Tensor w = test::random_tensor(DType::F32, {4, 12}, 6);
  // Gradient of the wrong shape (transposed) and missing.
  const Tensor gt = test::random_tensor(DType::F32, {12, 4}, 7);
  const TensorView gtv = gt.view();
  ScoreInputs in;
  in.gradient = &gtv;
  expect_mentions(error_of(prune(w.view(), Pattern{2, 4}, PruneMethod::Gradient, in, "w")),
                  {"'w'", "gradient", "[12, 4]", "[4, 12]"});
  expect_mentions(error_of(prune(w.view(), Pattern{2, 4}, PruneMethod::Gradient, {}, "w")),
                  {"'w'", "gradient"});
  // Norms of the wrong length, 2-D, missing.
  const Tensor a11 = Tensor::from_f32(std::vector<float>(11, 1.0f), {11});
  const Tensor a2d = Tensor::from_f32(std::vector<float>(12, 1.0f), {1, 12});
  for (const Tensor* a : {&a11, &a2d}) {
    const TensorView av = a->view();
    ScoreInputs ina;
    ina.act_norms = &av;
    expect_mentions(error_of(prune(w.view(), Pattern{2, 4}, PruneMethod::Wanda, ina, "w")),
                    {"'w'", "act_norms", shape_str(a->shape()), "[12]"});
  }
  expect_mentions(error_of(prune(w.view(), Pattern{2, 4}, PruneMethod::Wanda, {}, "w")),
                  {"'w'", "wanda"});
  // Non-prunable dtypes of the gradient and of the weight; weights that are not 2-D.
  const Tensor gi = Tensor::zeros(DType::I32, {4, 12});
  const TensorView giv = gi.view();
  in.gradient = &giv;
  expect_mentions(error_of(prune(w.view(), Pattern{2, 4}, PruneMethod::Gradient, in, "w")),
                  {"gradient", "I32"});
  const Tensor wi = Tensor::zeros(DType::I8, {4, 12});
  expect_mentions(error_of(prune(wi.view(), Pattern{2, 4}, PruneMethod::Magnitude, {}, "w")),
                  {"'w'", "I8"});
  for (Shape s : {Shape{12}, Shape{2, 2, 3}}) {
    const Tensor wn = Tensor::zeros(DType::F32, s);
    expect_mentions(error_of(prune(wn.view(), Pattern{2, 4}, PruneMethod::Magnitude, {}, "w")),
                    {"'w'", "2-D", shape_str(s)});
  }
  // A Pattern built by hand around the checks is still rejected.
  expect_mentions(error_of(prune(w.view(), Pattern{4, 2}, PruneMethod::Magnitude, {}, "w")),
                  {"'w'", "4:2"});
}

// Magnitude pruning ignores gradient and norms it does not need (they may even be bad).
TEST(PruneBadInput, UnusedInputsAreIgnored) {
  const Tensor w = test::random_tensor(DType::F32, {2, 8}, 8);
  const Tensor bad = Tensor::from_f32({kNaN}, {1});
  const TensorView bv = bad.view();
  ScoreInputs in;
  in.gradient = &bv;
  in.act_norms = &bv;
  EXPECT_TRUE(prune(w.view(), Pattern{2, 4}, PruneMethod::Magnitude, in).ok());
}

// Issue 13 W4: a negative activation norm silently inverted Wanda's |w| * a scores.
TEST(PruneBadInput, NegativeActNormNamesTensorColumnValue) {
  const Tensor w = test::random_tensor(DType::F32, {3, 8}, 4);
  std::vector<float> a(8, 1.0f);
  a[5] = -0.25f;
  for (const DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    const Tensor norms = Tensor::from_f32(a, {8}, dtype);
    const TensorView nv = norms.view();
    ScoreInputs in;
    in.act_norms = &nv;
    const std::string msg = error_of(prune(w.view(), Pattern{2, 4}, PruneMethod::Wanda, in, "fc1"));
    expect_mentions(msg, {"'fc1'", "act_norms", "column 5", "-0.25", "negative"});
    EXPECT_EQ(msg.find('\n'), std::string::npos);
  }
  // -0 is a norm of zero, not a negative one.
  std::vector<float> z(8, 1.0f);
  z[2] = -0.0f;
  const Tensor norms = Tensor::from_f32(z, {8});
  const TensorView nv = norms.view();
  ScoreInputs in;
  in.act_norms = &nv;
  EXPECT_TRUE(prune(w.view(), Pattern{2, 4}, PruneMethod::Wanda, in, "fc1").ok());
}

// Issue 13 C1/R2: a [2^48, 0] weight has no bytes; pruning it is O(1) (it allocated 48 bytes of
// row sums per row and threw std::bad_alloc out of the library).
TEST(PruneBadInput, HugeRowsWithNoColumnsPruneToNothing) {
  const int64_t rows = int64_t{1} << 48;
  const TensorView w{DType::F16, {rows, 0}, nullptr};
  auto r = prune_into(w, Pattern{2, 4}, PruneMethod::Magnitude, {}, nullptr, "empty");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->total_count, 0);
  EXPECT_EQ(r->pruned_count, 0);
}

}  // namespace
}  // namespace nmkit
