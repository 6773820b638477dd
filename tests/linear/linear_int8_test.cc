// INT8 linear kernels of the active tier against the scalar reference (src/ref/linear_ref.h), bit for
// bit: dense, sparse24, and slid (SlideSparse) weights whose activations are lifted while quantized.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/linear.h"
#include "nmkit/quant.h"
#include "nmkit/slide.h"
#include "src/cpu/kernel_table.h"
#include "src/cpu/linear_common.h"
#include "src/linear/linear_driver.h"
#include "src/linear/linear_pack.h"
#include "src/ref/linear_ref.h"
#include "src/ref/quant_ref.h"
#include "tests/util/random.h"

namespace nmkit::test {
namespace {

struct Shape3 {
  int64_t M, K, rows;
};

// Every M in {1,2,3,5,16,17,64,300}, K in {4,36,100,1000,4097}, rows in {1,7,64,129}.
const std::vector<Shape3>& shapes() {
  static const std::vector<Shape3> list{
      {1, 4, 1},     {2, 36, 7},     {3, 100, 64},  {5, 1000, 129}, {16, 4097, 7},  {17, 36, 129},
      {64, 1000, 7}, {300, 100, 64}, {1, 4097, 129}, {16, 4, 64},   {3, 4097, 1},   {300, 36, 7},
      {17, 1000, 1}, {64, 4, 129},   {5, 100, 1},   {2, 1000, 64},  {1, 36, 64},
  };
  return list;
}

bool tier_available() { return active_tier().ok(); }

// Random weight complying with keep:group (keep random positions per group, one in five kept
// values zeroed).
Tensor pruned_weight(int64_t rows, int64_t K, Pattern pattern, uint64_t seed) {
  std::vector<float> w = random_floats(static_cast<size_t>(rows * K), seed);
  std::mt19937_64 rng(seed ^ 0x51ED);
  std::vector<int> order(static_cast<size_t>(pattern.group));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g0 = 0; g0 < K; g0 += pattern.group) {
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
      std::shuffle(order.begin(), order.end(), rng);
      for (int i = 0; i < pattern.group; ++i) {
        const int64_t k = g0 + order[static_cast<size_t>(i)];
        if (k < K && !(i < pattern.keep && rng() % 5 != 0)) w[static_cast<size_t>(r * K + k)] = 0.0f;
      }
    }
  }
  return Tensor::from_f32(w, {rows, K});
}

enum class Form { Dense, Sparse24, Slid, NM };

void run_case(Form form, Pattern pattern, const Shape3& s, uint64_t seed, bool with_bias) {
  const std::string what = "M=" + std::to_string(s.M) + " K=" + std::to_string(s.K) + " rows=" + std::to_string(s.rows) +
                           " pattern=" + pattern.str() + " " + seed_trace(seed);
  SCOPED_TRACE(what);
  const Tensor w = pruned_weight(s.rows, s.K, pattern, seed);
  const Tensor x = random_tensor(DType::F32, {s.M, s.K}, seed + 1, -3.0f, 3.0f);
  // The plan's path (oneDNN's int32 sums where it picks oneDNN), and nmkit's own kernels.
  for (bool onednn : {true, false}) {
    LinearOptions options;
    options.int8 = true;
    options.onednn = onednn;
    Result<SparseLinear> layer = Error("unset");
    if (form == Form::Dense) {
      layer = SparseLinear::dense(w.view(), options);
    } else if (form == Form::Sparse24) {
      auto packed = compress_sparse24(w.view(), "w");
      ASSERT_TRUE(packed.ok()) << packed.error().message();
      layer = SparseLinear::sparse24(*packed, options);
    } else if (form == Form::Slid) {
      auto slid = nmkit::slide(w.view(), pattern, 32, "w");
      ASSERT_TRUE(slid.ok()) << slid.error().message();
      layer = SparseLinear::slid(slid->weight.view(), slid->geometry, options);
    } else {
      auto nm = compress_nm(w.view(), pattern, "w");
      ASSERT_TRUE(nm.ok()) << nm.error().message();
      layer = SparseLinear::nm(*nm, options);
    }
    ASSERT_TRUE(layer.ok()) << layer.error().message();
    // A slid weight names the route a call of M tokens runs: its 2:4 kernel, then from 8 tokens tiles
    // under nmkit's dense kernel, or from 4 panels under oneDNN's GEMM (the plan's thresholds).
    const std::string name = layer->kernel_name(s.M);
    const bool on_onednn = name.find("onednn") != std::string::npos;
    EXPECT_TRUE(!on_onednn || s.M >= 4) << name;
    if (form == Form::Slid) {
      EXPECT_EQ(name.find(" tiles") != std::string::npos, s.M >= 8 && !on_onednn) << name;
    }
    std::vector<float> bias;
    if (with_bias) {
      bias = random_floats(static_cast<size_t>(s.rows), seed + 2);
      ASSERT_TRUE(layer->set_bias(Tensor::from_f32(bias, {s.rows}).view()).ok());
    }
    // Reference: the codes of the dense weight and of the unlifted tokens by the scalar reference
    // quantizer (src/ref/quant_ref.h, not the tier kernels SparseLinear calls), summed exactly.
    const Quantized qx = ref_quantize(x.view(), QuantType::Int8);
    const Quantized qw = ref_quantize(w.view(), QuantType::Int8);
    std::vector<float> expected(static_cast<size_t>(s.M * s.rows));
    ref_int8_linear(qx.codes.as<int8_t>(), qx.scales.as<float>(), s.M, s.K, qw.codes.as<int8_t>(),
                    qw.scales.as<float>(), s.rows, with_bias ? bias.data() : nullptr, expected.data());
    if (form == Form::NM) {
      // The nm reference, on the format itself (its codes: the values quantized per row), agrees.
      auto nm = compress_nm(w.view(), pattern, "w");
      ASSERT_TRUE(nm.ok());
      NMPacked codes = std::move(*nm);
      const Quantized qv = ref_quantize(codes.values.view(), QuantType::Int8);
      codes.values = Tensor::copy_of(qv.codes.view());
      std::vector<float> from_nm(expected.size());
      ref_int8_nm_linear(qx.codes.as<int8_t>(), qx.scales.as<float>(), s.M, codes, qv.scales.as<float>(),
                         with_bias ? bias.data() : nullptr, from_nm.data());
      ASSERT_EQ(std::memcmp(from_nm.data(), expected.data(), expected.size() * 4), 0) << "the two references differ";
    }
    std::vector<float> y(expected.size(), std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(layer->apply(x.as<float>(), s.M, y.data()).ok());
    int failures = 0;
    bool any_nonzero = false;
    for (size_t i = 0; i < y.size(); ++i) {
      any_nonzero |= expected[i] != 0.0f;
      if (std::memcmp(&y[i], &expected[i], 4) != 0 && ++failures <= 5) {
        ADD_FAILURE() << what << " " << layer->kernel_name(s.M) << ": Y[" << i / static_cast<size_t>(s.rows) << ", "
                      << i % static_cast<size_t>(s.rows) << "] = " << y[i] << ", reference " << expected[i];
      }
    }
    EXPECT_EQ(failures, 0);
    EXPECT_TRUE(any_nonzero) << "an all-zero reference cannot detect unwritten outputs";
    if (layer->kernel_name(s.M).find("onednn") == std::string::npos) break;  // the same plan twice
  }
}

TEST(LinearInt8, DenseBitExact) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  uint64_t seed = 5000;
  for (const auto& s : shapes()) {
    ++seed;
    run_case(Form::Dense, {3, 4}, s, seed, seed % 3 == 0);
  }
}

TEST(LinearInt8, Sparse24BitExact) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  uint64_t seed = 6000;
  for (const auto& s : shapes()) {
    ++seed;
    run_case(Form::Sparse24, {2, 4}, s, seed, seed % 3 == 0);
  }
}

TEST(LinearInt8, SlidBitExact) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  uint64_t seed = 7000;
  const std::vector<Pattern> patterns{{6, 8}, {4, 6}, {8, 10}, {2, 4}, {3, 8}};
  size_t i = 0;
  for (const auto& pattern : patterns) {
    for (size_t j = i % 2; j < shapes().size(); j += 2) {
      ++seed;
      run_case(Form::Slid, pattern, shapes()[j], seed, seed % 2 == 0);
    }
    ++i;
  }
}

// INT8 nm (the decode form of 6:8 and other keep:group): every group size up to 16, groups dividing
// the 64-K mask words and not (their superchunks span several words), keep 1 to group-1, against
// both references (the dense codes and the nm format's own), on every shape and tier.
TEST(LinearInt8, NMBitExact) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  uint64_t seed = 8000;
  const std::vector<Pattern> patterns{{6, 8}, {2, 4}, {4, 8}, {1, 4}, {4, 6}, {3, 7}, {8, 10}, {14, 16}, {5, 16}};
  size_t i = 0;
  for (const auto& pattern : patterns) {
    // Every pattern meets a third of the shapes; together they cover all of them.
    for (size_t j = i % 3; j < shapes().size(); j += 3) {
      ++seed;
      run_case(Form::NM, pattern, shapes()[j], seed, seed % 2 == 0);
    }
    ++i;
  }
}

TEST(LinearInt8, LargestCodesDoNotOverflow) {
  // All codes at +-127 with K = 4097: |sum| = 127 * 127 * 4097, and the VNNI form adds 128 * 127 * K.
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const int64_t rows = 5, K = 4097;
  for (const int64_t M : {2, 64}) {  // nmkit's 2:4 kernel, then tiles or panels
    SCOPED_TRACE("M=" + std::to_string(M));
    std::vector<float> wv(static_cast<size_t>(rows * K)), xv(static_cast<size_t>(M * K));
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = (i % 4 < 2) ? ((i / 7) % 2 ? 1.0f : -1.0f) : 0.0f;
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = (i / 3) % 2 ? 2.0f : -2.0f;
    const Tensor w = Tensor::from_f32(wv, {rows, K}), x = Tensor::from_f32(xv, {M, K});
    LinearOptions options;
    options.int8 = true;
    auto packed = compress_sparse24(w.view(), "w");
    ASSERT_TRUE(packed.ok());
    auto sparse = SparseLinear::sparse24(*packed, options);
    auto dense = SparseLinear::dense(w.view(), options);
    ASSERT_TRUE(sparse.ok() && dense.ok());
    const Quantized qx = ref_quantize(x.view(), QuantType::Int8);
    const Quantized qw = ref_quantize(w.view(), QuantType::Int8);
    std::vector<float> expected(static_cast<size_t>(M * rows));
    ref_int8_linear(qx.codes.as<int8_t>(), qx.scales.as<float>(), M, K, qw.codes.as<int8_t>(), qw.scales.as<float>(),
                    rows, nullptr, expected.data());
    for (const SparseLinear* layer : {&*sparse, &*dense}) {
      std::vector<float> y(expected.size(), std::numeric_limits<float>::quiet_NaN());
      ASSERT_TRUE(layer->apply(x.as<float>(), M, y.data()).ok());
      for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], expected[i]) << layer->kernel_name(M) << " output " << i;
    }
  }
}

TEST(LinearInt8, SlidManyTokenCallsOnTwoThreadsFollowTheBias) {
  // Two threads make many-token calls of a slid layer at once (each decompresses rows into its own
  // scratch), then a bias set after them must reach the next calls too; every result bit-exact, on
  // the plan's route and on nmkit's own kernels.
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const int64_t rows = 37, K = 300, M = 24;
  const Tensor w = pruned_weight(rows, K, {6, 8}, 4242);
  const Tensor x = random_tensor(DType::F32, {M, K}, 4243, -3.0f, 3.0f);
  auto slid = nmkit::slide(w.view(), Pattern{6, 8}, 32, "w");
  ASSERT_TRUE(slid.ok());
  const Quantized qx = ref_quantize(x.view(), QuantType::Int8);
  const Quantized qw = ref_quantize(w.view(), QuantType::Int8);
  const std::vector<float> bias = random_floats(static_cast<size_t>(rows), 4244);
  for (bool onednn : {true, false}) {
    LinearOptions options;
    options.onednn = onednn;
    auto layer = SparseLinear::slid(slid->weight.view(), slid->geometry, options);
    ASSERT_TRUE(layer.ok());
    const std::string name = layer->kernel_name(M);
    EXPECT_TRUE(name.find(" onednn") != std::string::npos || name.find(" tiles") != std::string::npos) << name;
    for (bool with_bias : {false, true}) {
      if (with_bias) {
        ASSERT_TRUE(layer->set_bias(Tensor::from_f32(bias, {rows}).view()).ok());
      }
      std::vector<float> expected(static_cast<size_t>(M * rows));
      ref_int8_linear(qx.codes.as<int8_t>(), qx.scales.as<float>(), M, K, qw.codes.as<int8_t>(),
                      qw.scales.as<float>(), rows, with_bias ? bias.data() : nullptr, expected.data());
      std::vector<float> y0(expected.size(), NAN), y1(expected.size(), NAN);
      std::thread other([&] { EXPECT_TRUE(layer->apply(x.as<float>(), M, y1.data()).ok()); });
      EXPECT_TRUE(layer->apply(x.as<float>(), M, y0.data()).ok());
      other.join();
      EXPECT_EQ(std::memcmp(y0.data(), expected.data(), y0.size() * 4), 0) << layer->kernel_name(M) << " bias " << with_bias;
      EXPECT_EQ(std::memcmp(y1.data(), expected.data(), y1.size() * 4), 0) << layer->kernel_name(M) << " bias " << with_bias;
    }
  }
}

// Threads applying one layer at once share its oneDNN primitives, built by whichever call comes
// first: each call must bring its own scratchpad (src/linear/onednn_matmul.cc), or one call's partial
// sums land in another's (seen on this 37x300 layer at 24 tokens, about one try in twelve). Fresh
// layers, two threads making their first calls at once, then more: every Y bit-exact.
TEST(LinearInt8, ConcurrentOnednnCallsAreExact) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const int64_t rows = 37, K = 300, M = 24;  // awkward sizes: oneDNN pads them in its scratchpad
  const Tensor w = pruned_weight(rows, K, {2, 4}, 5151);
  const Tensor x = random_tensor(DType::F32, {M, K}, 5152, -3.0f, 3.0f);
  const Quantized qx = ref_quantize(x.view(), QuantType::Int8);
  const Quantized qw = ref_quantize(w.view(), QuantType::Int8);
  std::vector<float> expected(static_cast<size_t>(M * rows));
  ref_int8_linear(qx.codes.as<int8_t>(), qx.scales.as<float>(), M, K, qw.codes.as<int8_t>(), qw.scales.as<float>(),
                  rows, nullptr, expected.data());
  LinearOptions options;
  options.int8 = true;
  int wrong[2] = {0, 0};
  for (int trial = 0; trial < 100; ++trial) {
    auto layer = SparseLinear::dense(w.view(), options);
    ASSERT_TRUE(layer.ok()) << layer.error().message();
    if (layer->kernel_name(M).find("onednn") == std::string::npos) GTEST_SKIP() << "no oneDNN route: " << layer->kernel_name(M);
    auto run = [&](int* count) {
      std::vector<float> y(expected.size());
      for (int call = 0; call < 4; ++call) {
        std::fill(y.begin(), y.end(), NAN);
        const bool ok = layer->apply(x.as<float>(), M, y.data()).ok();
        if (!ok || std::memcmp(y.data(), expected.data(), y.size() * 4) != 0) ++*count;
      }
    };
    std::thread other(run, &wrong[1]);
    run(&wrong[0]);
    other.join();
  }
  EXPECT_EQ(wrong[0], 0);
  EXPECT_EQ(wrong[1], 0);
}

TEST(LinearInt8, Errors) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  LinearOptions options;
  options.int8 = true;
  const Tensor wide = Tensor::zeros(DType::F32, {1, 65537});
  EXPECT_FALSE(SparseLinear::dense(wide.view(), options).ok());  // int32 sums could overflow
  const Tensor w = pruned_weight(3, 16, {2, 4}, 1);
  auto nm = compress_nm(w.view(), {2, 4}, "w");
  ASSERT_TRUE(nm.ok());
  EXPECT_TRUE(SparseLinear::nm(*nm, options).ok());
  auto wide_group = compress_nm(pruned_weight(3, 64, {3, 32}, 3).view(), {3, 32}, "w");
  ASSERT_TRUE(wide_group.ok());
  EXPECT_FALSE(SparseLinear::nm(*wide_group, options).ok());  // groups up to 16
  auto slid = nmkit::slide(pruned_weight(3, 16, {6, 8}, 2).view(), Pattern{6, 8}, 32, "w");
  ASSERT_TRUE(slid.ok());
  const Tensor cut = Tensor::zeros(DType::F32, {3, 8});
  EXPECT_FALSE(SparseLinear::slid(cut.view(), slid->geometry, options).ok());
  auto layer = SparseLinear::slid(slid->weight.view(), slid->geometry, options);
  ASSERT_TRUE(layer.ok()) << layer.error().message();
  EXPECT_EQ(layer->K(), 16);
  std::vector<float> x(16, 1.0f), y(3);
  x[5] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(layer->apply(x.data(), 1, y.data()).ok());  // the quantizer rejects infinities
}

// The dense INT8 rows of a sparse24 weight's row blocks (tiles and panels), from the tier's kernel
// and from the portable decompression, equal the weight's codes, zero past K, at a row stride wider
// than the rows: K = 4, 36 and 4097 end with a 64-K record, 100 and 200 with 128-K ones.
TEST(LinearInt8, Sparse24TileHoldsTheCodes) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const cpu::TileI8Fn tile_kernel = cpu::kernels_for(*active_tier()).linear.sparse24_i8_tile;
  uint64_t seed = 7100;
  for (const int64_t rows : {1, 7}) {
    for (const int64_t K : {4, 36, 100, 200, 4097}) {
      ++seed;
      SCOPED_TRACE("K=" + std::to_string(K) + " rows=" + std::to_string(rows) + " " + seed_trace(seed));
      const Tensor w = pruned_weight(rows, K, {2, 4}, seed);
      auto sparse = compress_sparse24(w.view(), "w");
      ASSERT_TRUE(sparse.ok()) << sparse.error().message();
      auto quantized = quantize_weights(*sparse, QuantType::Int8, "w");
      ASSERT_TRUE(quantized.ok()) << quantized.error().message();
      auto packed = cpu::pack_sparse24_int8(*quantized);
      ASSERT_TRUE(packed.ok()) << packed.error().message();
      const cpu::PackedLinear& pl = **packed;
      ASSERT_EQ(pl.K_x, (K + 63) / 64 * 64);
      const Quantized codes = ref_quantize(w.view(), QuantType::Int8);
      const int64_t ld = pl.K_x + 5;
      std::vector<int8_t> portable(static_cast<size_t>(cpu::kLinearRowBlock * ld)), fast(portable.size());
      int64_t nonzero = 0;
      for (int64_t b = 0; b < pl.row_blocks; ++b) {
        std::fill(portable.begin(), portable.end(), int8_t{99});
        cpu::decompress_block(pl, b, DType::I8, portable.data(), ld);
        for (int r = 0; r < cpu::kLinearRowBlock; ++r) {
          const int64_t row = b * cpu::kLinearRowBlock + r;
          for (int64_t k = 0; k < pl.K_x; ++k) {
            const int8_t got = portable[static_cast<size_t>(r * ld + k)];
            const int8_t want = row < rows && k < K ? codes.codes.as<int8_t>()[row * K + k] : int8_t{0};
            ASSERT_EQ(got, want) << "row " << row << " k " << k;
            nonzero += got != 0;
          }
          for (int64_t k = pl.K_x; k < ld; ++k) ASSERT_EQ(portable[static_cast<size_t>(r * ld + k)], 99) << "past the row";
        }
        if (tile_kernel != nullptr) {
          std::fill(fast.begin(), fast.end(), int8_t{99});
          tile_kernel(pl, b, fast.data(), ld);
          ASSERT_EQ(std::memcmp(fast.data(), portable.data(), fast.size()), 0) << "tile of block " << b;
        }
      }
      EXPECT_GT(nonzero, 0);
    }
  }
}

}  // namespace
}  // namespace nmkit::test
