// Every linear kernel of the active tier (ctest runs the suite once per NMKIT_ISA tier) against the
// float64 reference of src/ref, on random pruned weights of awkward shapes.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/linear.h"
#include "nmkit/reference.h"
#include "nmkit/slide.h"
#include "nmkit/threads.h"
#include "core/thread_costs.h"
#include "src/cpu/linear_kernels.h"
#include "src/linear/linear_driver.h"
#include "src/linear/linear_pack.h"
#include "tests/linear/tolerance.h"
#include "tests/util/random.h"

namespace nmkit::test {
namespace {

struct Shape3 {
  int64_t M, K, rows;
};

// Every M in {1,2,3,5,16,17,64,300}, K in {4,36,100,1000,4097} and rows in {1,7,64,129} appears,
// each with tails (K % 4, K % 32, rows % 4 != 0); large M goes with small K*rows to keep the scalar
// tier fast.
const std::vector<Shape3>& shapes() {
  static const std::vector<Shape3> list{
      {1, 4, 1},     {2, 36, 7},     {3, 100, 64},  {5, 1000, 129}, {16, 4097, 7},  {17, 36, 129},
      {64, 1000, 7}, {300, 100, 64}, {1, 4097, 129}, {16, 4, 64},   {3, 4097, 1},   {300, 36, 7},
      {17, 1000, 1}, {64, 4, 129},   {5, 100, 1},   {2, 1000, 64},  {1, 36, 64},
  };
  return list;
}

std::string describe(const Shape3& s) {
  return "M=" + std::to_string(s.M) + " K=" + std::to_string(s.K) + " rows=" + std::to_string(s.rows);
}

// Skips when NMKIT_ISA names a tier this machine lacks.
bool tier_available() { return active_tier().ok(); }

// A random [rows, K] weight complying with keep:group: each group keeps `keep` random positions
// (fewer in the tail), and one kept value in five is zeroed so the sparse24/nm fill rule (stored
// zeros) is exercised. Values are exact in `dtype`.
Tensor pruned_weight(int64_t rows, int64_t K, Pattern pattern, DType dtype, uint64_t seed) {
  std::vector<float> w = random_floats(static_cast<size_t>(rows * K), seed, -1.0f, 1.0f);
  std::mt19937_64 rng(seed ^ 0x9E3779B97F4A7C15ull);
  std::vector<int> order(static_cast<size_t>(pattern.group));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g0 = 0; g0 < K; g0 += pattern.group) {
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
      std::shuffle(order.begin(), order.end(), rng);
      for (int i = 0; i < pattern.group; ++i) {
        const int64_t k = g0 + order[static_cast<size_t>(i)];
        if (k >= K) continue;
        const bool kept = i < pattern.keep && rng() % 5 != 0;
        if (!kept) w[static_cast<size_t>(r * K + k)] = 0.0f;
      }
    }
  }
  return Tensor::from_f32(w, {rows, K}, dtype);
}

// Sum over k of |x[m,k] w[r,k]| (+ |bias[r]|) in float64.
double abs_sum(const std::vector<float>& w, const std::vector<float>& x, const std::vector<float>& bias, int64_t K,
               int64_t r, int64_t m) {
  double s = bias.empty() ? 0.0 : std::fabs(static_cast<double>(bias[static_cast<size_t>(r)]));
  for (int64_t k = 0; k < K; ++k) {
    s += std::fabs(static_cast<double>(w[static_cast<size_t>(r * K + k)]) * x[static_cast<size_t>(m * K + k)]);
  }
  return s;
}

// Applies `layer` to random X (output poisoned with NaN first) and checks it against `reference_y`.
void check_layer(const SparseLinear& layer, const Tensor& dense_w, const Tensor& x, const Tensor& reference_y,
                 const std::vector<float>& bias, const std::string& what) {
  const int64_t M = x.rows(), K = x.cols(), rows = dense_w.rows();
  std::vector<float> y(static_cast<size_t>(M * rows), std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(layer.apply(x.as<float>(), M, y.data()).ok()) << what;
  const std::vector<float> wf = dense_w.to_f32();
  const std::vector<float> xf = x.to_f32();
  const float* ref = reference_y.as<float>();
  int failures = 0;
  bool any_nonzero = false;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      const size_t i = static_cast<size_t>(m * rows + r);
      const double expected = static_cast<double>(ref[i]) + (bias.empty() ? 0.0 : bias[static_cast<size_t>(r)]);
      const double tol = linear_tolerance(K, abs_sum(wf, xf, bias, K, r, m));
      any_nonzero |= expected != 0.0;
      if (!(std::fabs(static_cast<double>(y[i]) - expected) <= tol) && ++failures <= 5) {
        ADD_FAILURE() << what << " " << layer.kernel_name() << ": Y[" << m << ", " << r << "] = " << y[i]
                      << ", reference " << expected << ", tolerance " << tol;
      }
    }
  }
  EXPECT_EQ(failures, 0) << what;
  EXPECT_TRUE(any_nonzero) << what << ": an all-zero reference cannot detect unwritten outputs";
}

enum class Form { Dense, Sparse24, NM };

void run_case(Form form, Pattern pattern, DType dtype, const Shape3& s, uint64_t seed, bool with_bias) {
  const std::string what = describe(s) + " pattern=" + pattern.str() + " dtype=" + std::string(dtype_name(dtype)) +
                           " " + seed_trace(seed);
  SCOPED_TRACE(what);
  const Tensor w = pruned_weight(s.rows, s.K, form == Form::Dense ? Pattern{3, 4} : pattern, dtype, seed);
  const Tensor x = random_tensor(DType::F32, {s.M, s.K}, seed + 1);
  std::vector<float> bias;
  Result<MatmulResult> ref = Error("unset");
  // Every call runs the plan; where it picks oneDNN, nmkit's own kernels (onednn = false) run too.
  for (bool onednn : {true, false}) {
    LinearOptions options;
    options.onednn = onednn;
    Result<SparseLinear> layer = Error("unset");
    if (form == Form::Dense) {
      ref = ref_dense_matmul(w.view(), x.view());
      layer = SparseLinear::dense(w.view(), options);
    } else if (form == Form::Sparse24) {
      auto packed = compress_sparse24(w.view(), "w");
      ASSERT_TRUE(packed.ok()) << packed.error().message();
      ref = ref_sparse_matmul(*packed, x.view());
      layer = SparseLinear::sparse24(*packed, options);
    } else {
      auto packed = compress_nm(w.view(), pattern, "w");
      ASSERT_TRUE(packed.ok()) << packed.error().message();
      ref = ref_sparse_matmul(*packed, x.view());
      layer = SparseLinear::nm(*packed, options);
    }
    ASSERT_TRUE(ref.ok()) << ref.error().message();
    ASSERT_TRUE(layer.ok()) << layer.error().message();
    if (!onednn && layer->kernel_name(s.M).find("onednn") != std::string::npos) {
      ADD_FAILURE() << "onednn = false still plans " << layer->kernel_name(s.M);
    }
    if (with_bias) {
      bias = random_floats(static_cast<size_t>(s.rows), seed + 2);
      const Tensor b = Tensor::from_f32(bias, {s.rows});
      ASSERT_TRUE(layer->set_bias(b.view()).ok());
    }
    check_layer(*layer, w, x, ref->y, bias, what + " " + layer->kernel_name(s.M));
    if (onednn && layer->kernel_name(s.M).find("onednn") == std::string::npos) break;  // the same plan twice
  }
}

TEST(Linear, DenseMatchesReference) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  uint64_t seed = 1000;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const auto& s : shapes()) {
      ++seed;
      run_case(Form::Dense, {2, 4}, dtype, s, seed, seed % 3 == 0);
    }
  }
}

TEST(Linear, Sparse24MatchesReference) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  uint64_t seed = 2000;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const auto& s : shapes()) {
      ++seed;
      run_case(Form::Sparse24, {2, 4}, dtype, s, seed, seed % 3 == 0);
    }
  }
}

TEST(Linear, Sparse24AllNibbles) {
  // Every pair of positions in every group slot of a chunk: row r's group g keeps positions
  // pairs[(r + g) % 6], so 6 rows cover all 6 nibbles in all 8 group slots of a chunk.
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const int pairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
  const int64_t rows = 6, K = 64;
  std::vector<float> w(static_cast<size_t>(rows * K), 0.0f);
  const std::vector<float> values = random_floats(w.size(), 77, 0.5f, 1.5f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < K / 4; ++g) {
      for (int h : pairs[(r + g) % 6]) w[static_cast<size_t>(r * K + 4 * g + h)] = values[static_cast<size_t>(r * K + 4 * g + h)];
    }
  }
  const Tensor wt = Tensor::from_f32(w, {rows, K});
  auto packed = compress_sparse24(wt.view(), "w");
  ASSERT_TRUE(packed.ok());
  auto layer = SparseLinear::sparse24(*packed);
  ASSERT_TRUE(layer.ok());
  // 3 tokens run on rows; 16 and 33 on token lanes (one slab, then a pair of slabs and a partial one).
  for (int64_t M : {int64_t{3}, int64_t{16}, int64_t{33}}) {
    const Tensor x = random_tensor(DType::F32, {M, K}, 78 + static_cast<uint64_t>(M));
    auto ref = ref_sparse_matmul(*packed, x.view());
    ASSERT_TRUE(ref.ok());
    check_layer(*layer, wt, x, ref->y, {}, "all nibbles M=" + std::to_string(M));
  }
}

TEST(Linear, NMMatchesReference) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  uint64_t seed = 3000;
  // Groups dividing 16 and not (6, 7, 10), keep 1 to group-1.
  const std::vector<Pattern> patterns{{2, 4}, {4, 8}, {6, 8}, {1, 4}, {4, 6}, {3, 7}, {8, 10}, {14, 16}, {5, 16}};
  size_t i = 0;
  for (const auto& pattern : patterns) {
    for (DType dtype : {DType::F32, DType::BF16}) {
      // Every pattern and dtype meets a third of the shapes; together they cover all of them.
      for (size_t j = i % 3; j < shapes().size(); j += 3) {
        ++seed;
        run_case(Form::NM, pattern, dtype, shapes()[j], seed, seed % 2 == 0);
      }
      ++i;
    }
  }
}

TEST(Linear, ReportsBytesAndRatios) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const int64_t rows = 64, K = 256;
  const Tensor w = pruned_weight(rows, K, {2, 4}, DType::F32, 5);
  auto dense = SparseLinear::dense(w.view());
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ(dense->bytes_streamed(), static_cast<size_t>(rows * K * 4));
  EXPECT_DOUBLE_EQ(dense->byte_ratio(), 1.0);
  auto packed = compress_sparse24(w.view(), "w");
  ASSERT_TRUE(packed.ok());
  auto sparse = SparseLinear::sparse24(*packed);
  ASSERT_TRUE(sparse.ok());
  // 2 f32 values + 4 bits per group of 4 weights.
  EXPECT_EQ(sparse->bytes_streamed(), static_cast<size_t>(rows * (K / 4) * 8 + rows * K / 8));
  EXPECT_DOUBLE_EQ(sparse->byte_ratio(), 16.0 / 8.5);
  EXPECT_DOUBLE_EQ(sparse->mac_ratio(), 2.0);
  EXPECT_DOUBLE_EQ(sparse->theoretical_speedup(1), 16.0 / 8.5);
  EXPECT_DOUBLE_EQ(sparse->theoretical_speedup(256), 1.0);
  const Tensor wb = pruned_weight(rows, K, {6, 8}, DType::BF16, 6);
  auto nm = compress_nm(wb.view(), {6, 8}, "w");
  ASSERT_TRUE(nm.ok());
  auto nm_layer = SparseLinear::nm(*nm);
  ASSERT_TRUE(nm_layer.ok());
  EXPECT_NE(nm_layer->kernel_name().find("nm6:8 bf16"), std::string::npos) << nm_layer->kernel_name();
  EXPECT_EQ(nm_layer->weight_format(), WeightFormat::NM);
  EXPECT_EQ(nm_layer->pattern().str(), "6:8");
  EXPECT_DOUBLE_EQ(nm_layer->mac_ratio(), 8.0 / 6.0);
  // The form follows from the tier (linear.h): slid on AVX-512, the bitmask below it.
  if (nm_layer->tier() < IsaTier::Avx512) {
    // 6 bf16 values + 1 mask byte per group of 8 bf16 (16 bytes dense).
    EXPECT_DOUBLE_EQ(nm_layer->byte_ratio(), 16.0 / 13.0);
    EXPECT_EQ(nm_layer->kernel_name().find("as slid"), std::string::npos) << nm_layer->kernel_name();
  } else {
    // Slid: K' = 384; per row 192 bf16 values and 4 bits per 4 columns of K'.
    EXPECT_DOUBLE_EQ(nm_layer->byte_ratio(), 512.0 / (192 * 2 + 384 / 8));
    EXPECT_EQ(nm_layer->kernel_name(), "avx512 nm6:8 bf16 as slid");
    LinearOptions own;
    own.onednn = false;
    auto own_layer = SparseLinear::nm(*nm, own);
    ASSERT_TRUE(own_layer.ok());
    // Many tokens: tiles decompressed from the one slid form, under the dense kernel.
    EXPECT_EQ(own_layer->kernel_name(64), "avx512 nm6:8 bf16 as slid tiles");
    EXPECT_EQ(own_layer->bytes_streamed(64), own_layer->bytes_streamed(1));
    // bf16 activations keep the bitmask records, run by vpexpandw and vdpbf16ps at a few tokens.
    LinearOptions bf16x;
    bf16x.bf16_activations = true;
    auto pairs = SparseLinear::nm(*nm, bf16x);
    ASSERT_TRUE(pairs.ok());
    EXPECT_EQ(pairs->kernel_name(1), "avx512 nm6:8 bf16 (bf16 x)");
    EXPECT_DOUBLE_EQ(pairs->byte_ratio(), 16.0 / 13.0);
  }
  // Every route streams the packed form: oneDNN's GEMM runs on the weight's own rows (dense) or on
  // panels decompressed from it (nm), never on a copy.
  EXPECT_EQ(nm_layer->bytes_streamed(256), nm_layer->bytes_streamed(1));
  EXPECT_EQ(dense->bytes_streamed(256), static_cast<size_t>(rows * K * 4));
}

// sparse24 bf16 weights times bf16 activations at many tokens (panels of decompressed rows under
// oneDNN's bf16 GEMM, or tiles under nmkit's kernel): rows around the 16-row panel steps and the
// 4-row blocks, K around the 32-wide chunks and the 64-wide padding of the layout, token counts
// around the 12-token blocks of the kernels. A bias set after the first call must reach the next.
TEST(Linear, Sparse24Bf16xManyTokensMatchReferenceAndFollowTheBias) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  LinearOptions options;
  options.bf16_activations = true;
  uint64_t seed = 9500;
  for (const int64_t rows : {17, 100, 1024, 1039, 1041}) {
    for (const int64_t K : {4, 30, 64, 200}) {
      const int64_t M = std::vector<int64_t>{64, 67, 77, 100}[static_cast<size_t>(++seed % 4)];
      const std::string what = describe({M, K, rows}) + " " + seed_trace(seed);
      SCOPED_TRACE(what);
      const Tensor w = pruned_weight(rows, K, {2, 4}, DType::BF16, seed);
      // X exact in bf16, so that the layer's rounding leaves it as the reference takes it.
      const Tensor x_f32 = random_tensor(DType::F32, {M, K}, seed + 1);
      const Tensor x = Tensor::from_f32(Tensor::from_f32(x_f32.to_f32(), {M, K}, DType::BF16).to_f32(), {M, K});
      auto packed = compress_sparse24(w.view(), "w");
      ASSERT_TRUE(packed.ok()) << packed.error().message();
      auto layer = SparseLinear::sparse24(*packed, options);
      ASSERT_TRUE(layer.ok()) << layer.error().message();
      auto ref = ref_sparse_matmul(*packed, x.view());
      ASSERT_TRUE(ref.ok());
      check_layer(*layer, w, x, ref->y, {}, what + " " + layer->kernel_name(M));
      const std::vector<float> bias = random_floats(static_cast<size_t>(rows), seed + 2);
      ASSERT_TRUE(layer->set_bias(Tensor::from_f32(bias, {rows}).view()).ok());
      check_layer(*layer, w, x, ref->y, bias, what + " " + layer->kernel_name(M) + " with bias");
    }
  }
}

TEST(Linear, NMSlidFormsAgreeAndFollowTheBias) {
  // A 6:8 layer runs slid 2:4 for few tokens and its slid rows decompressed (tiles, or panels under
  // oneDNN) for many; both against the reference, and a bias set after a call must reach the next.
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const int64_t rows = 29, K = 200;
  const Tensor w = pruned_weight(rows, K, {6, 8}, DType::F32, 515);
  auto packed = compress_nm(w.view(), {6, 8}, "w");
  ASSERT_TRUE(packed.ok());
  auto layer = SparseLinear::nm(*packed);
  ASSERT_TRUE(layer.ok());
  const std::vector<float> bias = random_floats(static_cast<size_t>(rows), 516);
  for (bool with_bias : {false, true}) {
    if (with_bias) {
      ASSERT_TRUE(layer->set_bias(Tensor::from_f32(bias, {rows}).view()).ok());
    }
    for (int64_t M : {int64_t{3}, int64_t{12}, int64_t{40}, int64_t{100}}) {  // each route of the plan
      const Tensor x = random_tensor(DType::F32, {M, K}, 517 + static_cast<uint64_t>(M));
      auto ref = ref_sparse_matmul(*packed, x.view());
      ASSERT_TRUE(ref.ok());
      check_layer(*layer, w, x, ref->y, with_bias ? bias : std::vector<float>{},
                  layer->kernel_name(M) + " M=" + std::to_string(M) + (with_bias ? " with bias" : ""));
    }
  }
}

// One rule for non-finite activations on every path and tier (include/nmkit/linear.h): an Error
// naming the row and column, whichever form and kernel the plan picks for M.
TEST(Linear, NonFiniteXIsAnErrorOnEveryPath) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const int64_t rows = 12, K = 72;
  const Tensor w24 = pruned_weight(rows, K, {2, 4}, DType::F32, 31);
  const Tensor w68 = pruned_weight(rows, K, {6, 8}, DType::BF16, 32);
  const Tensor w24_bf16 = pruned_weight(rows, K, {2, 4}, DType::BF16, 34);
  auto p24 = compress_sparse24(w24.view(), "w");
  auto p24_bf16 = compress_sparse24(w24_bf16.view(), "w");
  ASSERT_TRUE(p24_bf16.ok());
  auto p68 = compress_nm(w68.view(), {6, 8}, "w");
  ASSERT_TRUE(p24.ok() && p68.ok());
  auto geometry = SlideGeometry::make({6, 8}, K);
  ASSERT_TRUE(geometry.ok());
  auto slid = slide(w68.view(), *geometry, "w");
  ASSERT_TRUE(slid.ok());
  for (bool onednn : {true, false}) {
    LinearOptions plain, int8, bf16x;
    plain.onednn = int8.onednn = bf16x.onednn = onednn;
    int8.int8 = true;
    bf16x.bf16_activations = true;
    // Built one at a time (a vector of Result<SparseLinear> trips GCC 12's -Wstringop-overflow).
    const std::vector<std::pair<std::string, std::function<Result<SparseLinear>()>>> makers{
        {"dense f32", [&] { return SparseLinear::dense(w24.view(), plain); }},
        {"dense bf16 (bf16 x)", [&] { return SparseLinear::dense(w68.view(), bf16x); }},
        {"dense bf16", [&] { return SparseLinear::dense(w68.view(), plain); }},
        {"dense f32 (bf16 x)", [&] { return SparseLinear::dense(w24.view(), bf16x); }},
        {"dense int8", [&] { return SparseLinear::dense(w24.view(), int8); }},
        {"sparse24 f32", [&] { return SparseLinear::sparse24(*p24, plain); }},
        {"sparse24 int8", [&] { return SparseLinear::sparse24(*p24, int8); }},
        {"sparse24 bf16 (bf16 x)", [&] { return SparseLinear::sparse24(*p24_bf16, bf16x); }},
        {"nm6:8 bf16", [&] { return SparseLinear::nm(*p68, plain); }},
        {"nm6:8 bf16 (bf16 x)", [&] { return SparseLinear::nm(*p68, bf16x); }},
        {"slid6:8 int8", [&] { return SparseLinear::slid(slid->view(), *geometry, plain); }},
    };
    for (const auto& [what, make] : makers) {
      auto layer = make();
      ASSERT_TRUE(layer.ok()) << what << ": " << layer.error().message();
      for (int64_t M : {int64_t{1}, int64_t{16}, int64_t{100}}) {
        for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
          Tensor x = random_tensor(DType::F32, {M, K}, 33 + static_cast<uint64_t>(M));
          const int64_t m = M / 2, k = K - 5;
          x.as<float>()[m * K + k] = bad;
          std::vector<float> y(static_cast<size_t>(M * rows));
          const Status status = layer->apply(x.as<float>(), M, y.data());
          ASSERT_FALSE(status.ok()) << what << " " << layer->kernel_name(M) << " M=" << M << " passed " << bad;
          const std::string expected = "row " + std::to_string(m) + ", column " + std::to_string(k) + ": value ";
          EXPECT_NE(status.error().message().find(expected), std::string::npos)
              << layer->kernel_name(M) << ": " << status.error().message();
        }
      }
    }
  }
}

// bf16 X through the tensor entry point equals the same values widened to f32 through the pointer
// one, bit for bit, on every route the plan picks (a bf16 GEMM takes the bits as they are), and a NaN
// in bf16 X is the same error naming its row and column.
TEST(Linear, Bf16InputEqualsItsWidenedValues) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const int64_t rows = 40, K = 200;
  const Tensor w = pruned_weight(rows, K, {2, 4}, DType::BF16, 61);
  auto packed = compress_sparse24(w.view(), "w");
  ASSERT_TRUE(packed.ok());
  LinearOptions bf16x, plain;
  bf16x.bf16_activations = true;
  for (int which = 0; which < 3; ++which) {
    auto layer = which == 0 ? SparseLinear::dense(w.view(), bf16x)
                 : which == 1 ? SparseLinear::sparse24(*packed, bf16x)
                              : SparseLinear::dense(w.view(), plain);
    ASSERT_TRUE(layer.ok()) << layer.error().message();
    for (int64_t M : {int64_t{1}, int64_t{17}, int64_t{100}, int64_t{300}}) {
      const Tensor x = random_tensor(DType::BF16, {M, K}, 62 + static_cast<uint64_t>(M));
      const std::vector<float> widened = x.to_f32();
      std::vector<float> from_bf16(static_cast<size_t>(M * rows), NAN), from_f32(from_bf16.size(), NAN);
      ASSERT_TRUE(layer->apply(x.view(), from_bf16.data()).ok()) << layer->kernel_name(M);
      ASSERT_TRUE(layer->apply(widened.data(), M, from_f32.data()).ok()) << layer->kernel_name(M);
      EXPECT_EQ(std::memcmp(from_bf16.data(), from_f32.data(), from_f32.size() * 4), 0) << layer->kernel_name(M);
      EXPECT_NE(from_f32[0], 0.0f);

      Tensor bad = random_tensor(DType::BF16, {M, K}, 63);
      const int64_t m = M - 1, k = K / 3;
      const uint16_t nan_bits = 0xFFC1;
      std::memcpy(bad.data() + static_cast<size_t>((m * K + k) * 2), &nan_bits, 2);
      const Status status = layer->apply(bad.view(), from_bf16.data());
      ASSERT_FALSE(status.ok()) << layer->kernel_name(M);
      const std::string expected = "x row " + std::to_string(m) + ", column " + std::to_string(k) + ": value ";
      EXPECT_NE(status.error().message().find(expected), std::string::npos) << layer->kernel_name(M) << ": " << status.error().message();
    }
  }
}

TEST(Linear, TensorApplyAndErrors) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const Tensor w = pruned_weight(7, 36, {2, 4}, DType::BF16, 9);
  auto layer = SparseLinear::dense(w.view());
  ASSERT_TRUE(layer.ok());
  const Tensor x = random_tensor(DType::BF16, {3, 36}, 10);
  auto y = layer->apply(x.view());
  ASSERT_TRUE(y.ok()) << y.error().message();
  auto ref = ref_dense_matmul(w.view(), x.view());
  ASSERT_TRUE(ref.ok());
  const Tensor x32 = Tensor::from_f32(x.to_f32(), {3, 36});
  check_layer(*layer, w, x32, ref->y, {}, "tensor apply seed=10");

  const Tensor bad_x = random_tensor(DType::F32, {3, 35}, 11);
  EXPECT_FALSE(layer->apply(bad_x.view()).ok());
  const Tensor bad_bias = random_tensor(DType::F32, {6}, 12);
  EXPECT_FALSE(layer->set_bias(bad_bias.view()).ok());
  float out = 0;
  EXPECT_FALSE(layer->apply(x32.as<float>(), -1, &out).ok());
  const Tensor ints = Tensor::zeros(DType::I32, {2, 4});
  EXPECT_FALSE(SparseLinear::dense(ints.view()).ok());
  const Tensor wide = pruned_weight(2, 64, {4, 32}, DType::F32, 13);
  auto wide_nm = compress_nm(wide.view(), {4, 32}, "w");
  ASSERT_TRUE(wide_nm.ok());
  EXPECT_FALSE(SparseLinear::nm(*wide_nm).ok());  // groups above 16 have no kernel
  // Also when the pattern would slide (keep = group - 2): the slid packing is not a way around it.
  const Tensor wide_slidable = pruned_weight(2, 64, {30, 32}, DType::F32, 14);
  auto wide_slidable_nm = compress_nm(wide_slidable.view(), {30, 32}, "w");
  ASSERT_TRUE(wide_slidable_nm.ok());
  auto refused = SparseLinear::nm(*wide_slidable_nm);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("group > 16"), std::string::npos) << refused.error().message();
}

}  // namespace
}  // namespace nmkit::test

namespace nmkit::test {
namespace {

// The AVX-512 nm kernel has two forms (lane ranks from a table, or from VPOPCNTDQ where the CPU has
// it); SparseLinear runs only the one this CPU picks, so the table form is called directly here.
TEST(Linear, NMTableFormOnAvx512) {
  if (detected_tier() < IsaTier::Avx512) GTEST_SKIP() << "no AVX-512 here";
  cpu::LinearKernels slots;
  cpu::avx512::fill_linear_nm_table(slots);
  uint64_t seed = 8000;
  for (const Pattern pattern : {Pattern{6, 8}, Pattern{3, 7}, Pattern{2, 4}}) {
    for (DType dtype : {DType::F32, DType::BF16}) {
      for (const Shape3 s : {Shape3{5, 1000, 7}, Shape3{1, 36, 129}, Shape3{17, 4097, 3}}) {
        ++seed;
        SCOPED_TRACE(describe(s) + " pattern=" + pattern.str() + " " + seed_trace(seed));
        const Tensor w = pruned_weight(s.rows, s.K, pattern, dtype, seed);
        const Tensor x = random_tensor(DType::F32, {s.M, s.K}, seed + 1);
        auto packed = compress_nm(w.view(), pattern, "w");
        ASSERT_TRUE(packed.ok());
        auto layout = cpu::pack_nm(*packed);
        ASSERT_TRUE(layout.ok());
        const cpu::PackedLinear& pl = **layout;
        std::vector<float> xp(static_cast<size_t>(s.M * pl.K_x), 0.0f);
        for (int64_t m = 0; m < s.M; ++m) std::memcpy(xp.data() + m * pl.K_x, x.as<float>() + m * s.K, static_cast<size_t>(s.K) * 4);
        std::vector<float> y(static_cast<size_t>(s.M * s.rows), std::numeric_limits<float>::quiet_NaN());
        cpu::LinearCall call;
        call.w = &pl;
        call.x = xp.data();
        call.M = s.M;
        call.y = y.data();
        call.ldy = s.rows;
        call.block_end = pl.row_blocks;
        // The streaming kernel, then the slab kernel into a second output (checked below).
        (dtype == DType::F32 ? slots.nm_f32 : slots.nm_bf16)(call);
        std::vector<float> y_slabs(y.size(), std::numeric_limits<float>::quiet_NaN());
        cpu::LinearCall slab_call = call;
        slab_call.y = y_slabs.data();
        (dtype == DType::F32 ? slots.nm_f32_slabs : slots.nm_bf16_slabs)(slab_call);
        // The table form's tile expansion must equal the reference's dense weight exactly (rows
        // at a stride wider than K_x, nothing written past K_x).
        const int64_t ld = pl.K_x + 3;
        const std::vector<float> dense_w = w.to_f32();
        std::vector<float> tile(static_cast<size_t>(cpu::kLinearRowBlock * ld));
        for (int64_t b = 0; b < pl.row_blocks; ++b) {
          std::fill(tile.begin(), tile.end(), std::numeric_limits<float>::quiet_NaN());
          (dtype == DType::F32 ? slots.nm_tile_f32 : slots.nm_tile_bf16)(pl, b, tile.data(), ld);
          for (int r = 0; r < cpu::kLinearRowBlock; ++r) {
            const int64_t row = b * cpu::kLinearRowBlock + r;
            for (int64_t k = 0; k < ld; ++k) {
              const float got = tile[static_cast<size_t>(r * ld + k)];
              if (k >= pl.K_x) {
                ASSERT_TRUE(std::isnan(got)) << "row " << row << " k " << k << " written past K_x";
              } else {
                const float want = row < s.rows && k < s.K ? dense_w[static_cast<size_t>(row * s.K + k)] : 0.0f;
                ASSERT_EQ(got, want) << "row " << row << " k " << k;
              }
            }
          }
        }
        if (dtype == DType::BF16) {
          // The table form's bf16-activation slab kernel (vdpbf16ps) on X rounded to bf16.
          const Tensor xr = Tensor::from_f32(Tensor::from_f32(x.to_f32(), {s.M, s.K}, DType::BF16).to_f32(), {s.M, s.K});
          std::vector<float> xrp(xp.size(), 0.0f);
          for (int64_t m = 0; m < s.M; ++m) std::memcpy(xrp.data() + m * pl.K_x, xr.as<float>() + m * s.K, static_cast<size_t>(s.K) * 4);
          std::vector<uint16_t> xb(xrp.size());
          for (size_t i = 0; i < xb.size(); ++i) {
            uint32_t bits;
            std::memcpy(&bits, xrp.data() + i, 4);
            xb[i] = static_cast<uint16_t>(bits >> 16);
          }
          std::vector<float> yb(y.size(), std::numeric_limits<float>::quiet_NaN());
          cpu::LinearCall bc = call;
          bc.x = xrp.data();
          bc.x_bf16 = xb.data();
          bc.y = yb.data();
          slots.nm_bf16x_slabs(bc);
          auto refb = ref_sparse_matmul(*packed, xr.view());
          ASSERT_TRUE(refb.ok());
          const std::vector<float> wf = w.to_f32(), xf = xr.to_f32();
          for (int64_t m = 0; m < s.M; ++m) {
            for (int64_t r = 0; r < s.rows; ++r) {
              const size_t i = static_cast<size_t>(m * s.rows + r);
              const double tol = linear_tolerance(s.K, abs_sum(wf, xf, {}, s.K, r, m));
              ASSERT_LE(std::fabs(static_cast<double>(yb[i]) - refb->y.as<float>()[i]), tol) << "bf16 x: Y[" << m << ", " << r << "]";
            }
          }
        }
        auto ref = ref_sparse_matmul(*packed, x.view());
        ASSERT_TRUE(ref.ok());
        const std::vector<float> wf = w.to_f32(), xf = x.to_f32();
        for (int64_t m = 0; m < s.M; ++m) {
          for (int64_t r = 0; r < s.rows; ++r) {
            const size_t i = static_cast<size_t>(m * s.rows + r);
            const double tol = linear_tolerance(s.K, abs_sum(wf, xf, {}, s.K, r, m));
            ASSERT_LE(std::fabs(static_cast<double>(y[i]) - ref->y.as<float>()[i]), tol) << "Y[" << m << ", " << r << "]";
            ASSERT_LE(std::fabs(static_cast<double>(y_slabs[i]) - ref->y.as<float>()[i]), tol) << "slabs: Y[" << m << ", " << r << "]";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace nmkit::test

namespace nmkit::test {
namespace {

// LinearOptions::bf16_activations: X is rounded to bf16 first on every tier (AVX-512 then uses
// vdpbf16ps for sparse24 bf16); the reference takes the rounded X.
TEST(Linear, Bf16ActivationsMatchReference) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  LinearOptions options;
  options.bf16_activations = true;
  uint64_t seed = 9000;
  for (const auto& s : shapes()) {
    // Forms 2-5: nm patterns whose superchunk (lcm(group, 32)) holds one or several 32-bit mask
    // words of the bf16 x bf16 kernel, groups dividing 32 and not.
    const std::vector<Pattern> nm_patterns{{6, 8}, {3, 7}, {5, 16}, {1, 4}};
    for (int form = 0; form < 6; ++form) {
      ++seed;
      const Pattern pattern = form >= 2 ? nm_patterns[static_cast<size_t>(form - 2)] : Pattern{2, 4};
      const DType dtype = form == 1 ? DType::F32 : DType::BF16;
      const std::string what = describe(s) + " form=" + std::to_string(form) + " " + seed_trace(seed);
      SCOPED_TRACE(what);
      const Tensor w = pruned_weight(s.rows, s.K, pattern, dtype, seed);
      const Tensor x = random_tensor(DType::F32, {s.M, s.K}, seed + 1);
      const Tensor x_rounded = Tensor::from_f32(Tensor::from_f32(x.to_f32(), {s.M, s.K}, DType::BF16).to_f32(), {s.M, s.K});
      Result<SparseLinear> layer = Error("unset");
      Result<MatmulResult> ref = Error("unset");
      if (form == 0) {
        auto packed = compress_sparse24(w.view(), "w");
        ASSERT_TRUE(packed.ok());
        layer = SparseLinear::sparse24(*packed, options);
        ref = ref_sparse_matmul(*packed, x_rounded.view());
      } else if (form == 1) {
        layer = SparseLinear::dense(w.view(), options);
        ref = ref_dense_matmul(w.view(), x_rounded.view());
      } else {
        auto packed = compress_nm(w.view(), pattern, "w");
        ASSERT_TRUE(packed.ok());
        layer = SparseLinear::nm(*packed, options);
        ref = ref_sparse_matmul(*packed, x_rounded.view());
      }
      ASSERT_TRUE(layer.ok() && ref.ok());
      EXPECT_NE(layer->kernel_name().find("(bf16 x)"), std::string::npos);
      // check_layer's tolerance uses |x| of the rounded X: the products it bounds are those summed.
      std::vector<float> y(static_cast<size_t>(s.M * s.rows), std::numeric_limits<float>::quiet_NaN());
      ASSERT_TRUE(layer->apply(x.as<float>(), s.M, y.data()).ok());
      const std::vector<float> wf = w.to_f32(), xf = x_rounded.to_f32();
      for (int64_t m = 0; m < s.M; ++m) {
        for (int64_t r = 0; r < s.rows; ++r) {
          const size_t i = static_cast<size_t>(m * s.rows + r);
          const double tol = linear_tolerance(s.K, abs_sum(wf, xf, {}, s.K, r, m));
          ASSERT_LE(std::fabs(static_cast<double>(y[i]) - ref->y.as<float>()[i]), tol) << "Y[" << m << ", " << r << "]";
        }
      }
    }
  }
  LinearOptions int8 = options;
  int8.int8 = true;
  EXPECT_FALSE(SparseLinear::dense(pruned_weight(4, 8, {2, 4}, DType::F32, 1).view(), int8).ok());
}

// With sleeping workers (ctest linear_sleeping_workers sets OMP_WAIT_POLICY=passive) a call shorter
// than the workers' start runs oneDNN on one thread, a long one on the whole team; both match the
// reference, with and without bias.
TEST(Linear, ShortOnednnCallsOnSleepingWorkersRunOnOneThread) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  if (thread_count() == 1 || pool_start_seconds() < 10e-6) GTEST_SKIP() << "workers spin between jobs here";
  struct Case {
    int64_t M, K, rows;
    bool one_thread;
  };
  uint64_t seed = 9100;
  for (const Case& c : {Case{16, 40, 24, true}, Case{64, 100, 7, true}, Case{64, 512, 512, false}}) {
    ++seed;
    const Tensor w = pruned_weight(c.rows, c.K, {4, 4}, DType::F32, seed);
    const Tensor x = random_tensor(DType::F32, {c.M, c.K}, seed + 1);
    auto layer = SparseLinear::dense(w.view());
    ASSERT_TRUE(layer.ok()) << layer.error().message();
    const std::string name = layer->kernel_name(c.M);
    if (name.find("onednn") == std::string::npos) GTEST_SKIP() << "no oneDNN f32 here: " << name;
    EXPECT_EQ(name.find("1 thread") != std::string::npos, c.one_thread) << name;
    auto ref = ref_dense_matmul(w.view(), x.view());
    ASSERT_TRUE(ref.ok()) << ref.error().message();
    using GetThreads = int (*)();
    const auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    const int caller_threads = get != nullptr ? get() : 0;
    check_layer(*layer, w, x, ref->y, {}, name);
    // The call's own count is not left behind as the calling thread's OpenMP setting.
    if (get != nullptr) {
      EXPECT_EQ(get(), caller_threads) << name;
    }
    const std::vector<float> bias = random_floats(static_cast<size_t>(c.rows), seed + 2);
    const Tensor b = Tensor::from_f32(bias, {c.rows});
    ASSERT_TRUE(layer->set_bias(b.view()).ok());
    check_layer(*layer, w, x, ref->y, bias, name + " with bias");
  }
}

}  // namespace
}  // namespace nmkit::test
