// Every tier's quantization kernel, plain and fused with lifting, against the scalar reference
// (src/ref/quant_ref.cc) bit for bit: codes and scales, on awkward shapes, all three input dtypes,
// ties, zero rows, tiny rows (infinite inv) and huge values; and the promised errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nmkit/quant.h"
#include "nmkit/slide.h"
#include "nmkit/threads.h"
#include "src/cpu/kernel_table.h"
#include "src/quant/quantize_with.h"
#include "src/ref/quant_ref.h"
#include "tests/quant/tiers.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

constexpr uint8_t kPoison = 0xA5;

// Rows of varied character: random values of a random magnitude, integer rows whose absmax makes
// x * inv land on halves (ties), a zero row, a row with -0.0 and a row too small for a finite inv.
std::vector<float> test_values(int64_t M, int64_t K, uint64_t seed, DType dtype) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(static_cast<size_t>(M * K));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t m = 0; m < M; ++m) {
    float* row = x.data() + m * K;
    const int kind = static_cast<int>((m + static_cast<int64_t>(seed)) % 6);
    // f16 overflows at 65504: keep its magnitudes within 2^-14..2^12.
    const int span = dtype == DType::F16 ? 26 : 40;
    const float magnitude = std::exp2(static_cast<float>(static_cast<int>(rng() % span) - span / 2 - 1));
    for (int64_t k = 0; k < K; ++k) {
      switch (kind) {
        case 0: row[k] = uniform(rng) * magnitude; break;
        case 1: row[k] = static_cast<float>(static_cast<int>(rng() % 509) - 254); break;  // inv 0.5
        case 2: row[k] = 0.0f; break;
        case 3: row[k] = (rng() % 3 == 0) ? -0.0f : uniform(rng) * 3e4f; break;
        case 4: row[k] = static_cast<float>(static_cast<int>(rng() % 897) - 448) * 0.25f; break;
        default:
          // absmax below 2^-121: inv = 127/absmax overflows to infinity (f32 and bf16 only reach it).
          row[k] = dtype == DType::F16 ? uniform(rng) : (rng() % 2 ? 1e-38f : -0.0f) * (rng() % 3 ? 1.0f : 0.0f);
          break;
      }
    }
    if (kind == 1 && K > 0) row[0] = 254.0f;
  }
  return x;
}

struct Case {
  IsaTier tier;
  DType dtype;
  QuantType type;
  int64_t M, K;
  std::optional<SlideGeometry> lift;
  StreamStores stream = StreamStores::Never;
  std::string str() const {
    return std::string(tier_name(tier)) + " " + std::string(dtype_name(dtype)) + " " +
           std::string(quant_type_name(type)) + " M=" + std::to_string(M) + " K=" + std::to_string(K) +
           (lift ? " lift " + lift->pattern.str() + " align " + std::to_string(lift->align) : "") +
           (stream == StreamStores::Always ? " streaming" : "");
  }
};

void run_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.str() + " " + test::seed_trace(seed));
  Tensor x = Tensor::from_f32(test_values(c.M, c.K, seed, c.dtype), {c.M, c.K}, c.dtype);
  const int64_t cols = c.lift ? c.lift->K_prime() : c.K;
  const int64_t stride = cols + 5;  // bytes between rows stay untouched
  std::vector<uint8_t> codes(static_cast<size_t>(c.M * stride), kPoison);
  std::vector<float> scales(static_cast<size_t>(c.M), std::numeric_limits<float>::quiet_NaN());
  const SlideGeometry* lift = c.lift ? &*c.lift : nullptr;
  Status status = quantize_rows_with(cpu::kernels_for(c.tier).quant, x.view(), c.type, lift,
                                     reinterpret_cast<std::byte*>(codes.data()), stride,
                                     scales.data(), "x", c.stream);
  ASSERT_TRUE(status.ok()) << status.error().message();
  const Quantized expected = ref_quantize(x.view(), c.type, lift);
  const auto* want = expected.codes.as<uint8_t>();
  for (int64_t m = 0; m < c.M; ++m) {
    uint32_t got_bits, want_bits;
    std::memcpy(&got_bits, &scales[static_cast<size_t>(m)], 4);
    std::memcpy(&want_bits, expected.scales.as<float>() + m, 4);
    ASSERT_EQ(got_bits, want_bits) << "scale of row " << m;
    for (int64_t j = 0; j < cols; ++j) {
      ASSERT_EQ(codes[static_cast<size_t>(m * stride + j)], want[m * cols + j])
          << "row " << m << " column " << j << " source "
          << (lift ? lift->source_column(j) : j);
    }
    for (int64_t j = cols; j < stride; ++j) ASSERT_EQ(codes[static_cast<size_t>(m * stride + j)], kPoison);
  }
}

TEST(Quantize, EveryTierMatchesReference) {
  const auto tiers = test::tiers_under_test();
  if (tiers.empty()) GTEST_SKIP() << "NMKIT_ISA names a tier this machine does not run";
  std::vector<std::optional<Pattern>> lifts{std::nullopt, Pattern{2, 4}, Pattern{4, 6}, Pattern{6, 8},
                                            Pattern{8, 10}, Pattern{14, 16}, Pattern{2, 12}, Pattern{62, 64}};
  uint64_t seed = 1000;
  for (IsaTier tier : tiers) {
    for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
      for (QuantType type : {QuantType::Int8, QuantType::E4M3}) {
        for (int64_t K : {1, 3, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129, 1000, 4097}) {
          for (const auto& pattern : lifts) {
            for (int align : {4, 64}) {
              if (!pattern && align != 4) continue;
              std::optional<SlideGeometry> lift;
              if (pattern) {
                auto g = SlideGeometry::make(*pattern, K, align);
                ASSERT_TRUE(g.ok());
                lift = *g;
              }
              for (StreamStores stream : {StreamStores::Never, StreamStores::Always}) {
                run_case(Case{tier, dtype, type, 7, K, lift, stream}, ++seed);
                if (HasFatalFailure()) return;
              }
            }
          }
        }
      }
    }
  }
}

// With absmax = qmax, inv is exactly 1 and the products are the inputs themselves: one row holding
// every bf16 value of magnitude <= qmax runs each tier's vector encoder over all of them.
TEST(Quantize, EveryBf16ValueThroughEachTier) {
  const auto tiers = test::tiers_under_test();
  if (tiers.empty()) GTEST_SKIP();
  for (QuantType type : {QuantType::Int8, QuantType::E4M3}) {
    const float qmax = type == QuantType::Int8 ? 127.0f : 448.0f;
    std::vector<uint16_t> values;
    for (uint32_t bits = 0; bits < 65536; ++bits) {
      const float v = bf16_to_f32(static_cast<uint16_t>(bits));
      if (std::fabs(v) <= qmax) values.push_back(static_cast<uint16_t>(bits));
    }
    values.push_back(f32_to_bf16(qmax));  // absmax = qmax even if the order above changes
    const auto K = static_cast<int64_t>(values.size());
    Tensor x = Tensor::empty(DType::BF16, {1, K});
    std::memcpy(x.data(), values.data(), values.size() * 2);
    const Quantized want = ref_quantize(x.view(), type);
    ASSERT_EQ(want.scales.as<float>()[0], 1.0f);
    for (IsaTier tier : tiers) {
      SCOPED_TRACE(std::string(tier_name(tier)) + " " + std::string(quant_type_name(type)));
      std::vector<uint8_t> codes(static_cast<size_t>(K), kPoison);
      float scale = 0;
      ASSERT_TRUE(quantize_rows_with(cpu::kernels_for(tier).quant, x.view(), type, nullptr,
                                     reinterpret_cast<std::byte*>(codes.data()), K, &scale, "x")
                      .ok());
      EXPECT_EQ(scale, 1.0f);
      for (int64_t k = 0; k < K; ++k) {
        const float v = bf16_to_f32(values[static_cast<size_t>(k)]);
        ASSERT_EQ(codes[static_cast<size_t>(k)], want.codes.as<uint8_t>()[k]) << "input " << v;
        if (type == QuantType::E4M3) {
          ASSERT_EQ(codes[static_cast<size_t>(k)], f32_to_e4m3(v)) << "input " << v;
        }
      }
    }
  }
}

// Several row blocks per call (quantize_rows_with splits rows into ~64 KiB blocks over the pool).
TEST(Quantize, ManyTokensMatchReference) {
  const auto tiers = test::tiers_under_test();
  if (tiers.empty()) GTEST_SKIP();
  auto g = SlideGeometry::make(Pattern{6, 8}, 1000, 32);
  ASSERT_TRUE(g.ok());
  for (IsaTier tier : tiers) {
    run_case(Case{tier, DType::BF16, QuantType::Int8, 301, 1000, *g}, 77);
    run_case(Case{tier, DType::F32, QuantType::E4M3, 300, 257, std::nullopt}, 78);
    run_case(Case{tier, DType::F16, QuantType::E4M3, 301, 1000, *g, StreamStores::Always}, 79);
  }
}

// A kernel that records which thread quantized which rows, and holds every block until a second
// thread has entered (at most 10 s), so that a pool of two or more threads must be seen working at once.
struct ThreadRecorder {
  static inline std::mutex mutex;
  static inline std::condition_variable arrived;
  static inline std::set<std::thread::id> threads;
  static inline std::vector<std::pair<int64_t, int64_t>> ranges;
  static inline cpu::QuantRowsFn inner = nullptr;

  static int64_t quantize_rows(const cpu::QuantRowsArgs& args, int64_t begin, int64_t end, std::byte* scratch) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
      ranges.emplace_back(begin, end);
      arrived.notify_all();
      arrived.wait_for(lock, std::chrono::seconds(10), [] { return threads.size() >= 2; });
    }
    return inner(args, begin, end, scratch);
  }
};

TEST(Quantize, RowBlocksSpreadOverThreads) {
  const auto tiers = test::tiers_under_test();
  if (tiers.empty()) GTEST_SKIP();
  const int64_t M = 257, K = 1000;  // f32: 16 rows per 64 KiB block, 17 blocks
  Tensor x = test::random_tensor(DType::F32, {M, K}, 5, -2.0f, 2.0f);
  const Quantized want = ref_quantize(x.view(), QuantType::Int8);
  for (IsaTier tier : tiers) {
    ThreadRecorder::threads.clear();
    ThreadRecorder::ranges.clear();
    ThreadRecorder::inner = cpu::kernels_for(tier).quant.quantize_rows;
    cpu::QuantKernels recording;
    recording.quantize_rows = &ThreadRecorder::quantize_rows;
    std::vector<int8_t> codes(static_cast<size_t>(M * K));
    std::vector<float> scales(static_cast<size_t>(M));
    ASSERT_TRUE(quantize_rows_with(recording, x.view(), QuantType::Int8, nullptr,
                                   reinterpret_cast<std::byte*>(codes.data()), K, scales.data(), "x")
                    .ok());
    // Every row handed out exactly once, whichever thread took it.
    auto ranges = ThreadRecorder::ranges;
    std::sort(ranges.begin(), ranges.end());
    ASSERT_GT(ranges.size(), 1u);
    int64_t next = 0;
    for (const auto& [begin, end] : ranges) {
      ASSERT_EQ(begin, next);
      ASSERT_GT(end, begin);
      next = end;
    }
    ASSERT_EQ(next, M);
    if (thread_count() >= 2) {
      EXPECT_GE(ThreadRecorder::threads.size(), 2u) << "a pool of " << thread_count() << " threads quantized on one";
    } else {
      EXPECT_EQ(ThreadRecorder::threads.size(), 1u);
    }
    EXPECT_EQ(0, std::memcmp(codes.data(), want.codes.data(), codes.size()));
    EXPECT_EQ(0, std::memcmp(scales.data(), want.scales.data(), scales.size() * 4));
  }
}

TEST(Quantize, FusedEqualsQuantizeThenLift) {
  // The public calls (active tier): quantize_lift == lift(quantize_tokens), scales equal.
  if (!active_tier().ok()) GTEST_SKIP();
  const uint64_t seed = 99;
  SCOPED_TRACE(test::seed_trace(seed));
  for (Pattern p : {Pattern{2, 4}, Pattern{4, 6}, Pattern{6, 8}, Pattern{8, 10}}) {
    for (QuantType type : {QuantType::Int8, QuantType::E4M3}) {
      Tensor x = test::random_tensor(DType::BF16, {5, 4097}, seed, -3.0f, 3.0f);
      auto g = SlideGeometry::make(p, 4097, 32);
      ASSERT_TRUE(g.ok());
      auto fused = quantize_lift(x.view(), *g, type, "x");
      auto plain = quantize_tokens(x.view(), type, "x");
      ASSERT_TRUE(fused.ok() && plain.ok());
      EXPECT_EQ(fused->codes.dtype(), quant_code_dtype(type));
      EXPECT_EQ(fused->codes.shape(), (Shape{5, g->K_prime()}));
      auto lifted = lift(plain->codes.view(), *g, "codes");
      ASSERT_TRUE(lifted.ok());
      ASSERT_EQ(0, std::memcmp(lifted->data(), fused->codes.data(), lifted->nbytes())) << p.str();
      ASSERT_EQ(0, std::memcmp(plain->scales.data(), fused->scales.data(), plain->scales.nbytes()));
    }
  }
}

TEST(Quantize, WeightsPerChannelDenseAndSparse24) {
  if (!active_tier().ok()) GTEST_SKIP();
  const uint64_t seed = 5;
  SCOPED_TRACE(test::seed_trace(seed));
  // A 2:4 weight: the two largest of each group of a random tensor.
  const int64_t rows = 9, K = 103;
  auto values = test::random_floats(static_cast<size_t>(rows * K), seed);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < K; g += 4) {
      for (int64_t k = g; k < std::min(g + 4, K); ++k) {
        if ((k + r) % 4 < 2) values[static_cast<size_t>(r * K + k)] = 0.0f;
      }
    }
  }
  Tensor w = Tensor::from_f32(values, {rows, K}, DType::BF16);
  for (QuantType type : {QuantType::Int8, QuantType::E4M3}) {
    auto dense = quantize_weights(w.view(), type, "w");
    ASSERT_TRUE(dense.ok());
    const Quantized expected = ref_quantize(w.view(), type);
    ASSERT_EQ(0, std::memcmp(dense->codes.data(), expected.codes.data(), expected.codes.nbytes()));
    ASSERT_EQ(0, std::memcmp(dense->scales.data(), expected.scales.data(), expected.scales.nbytes()));
    auto packed = compress_sparse24(w.view(), "w");
    ASSERT_TRUE(packed.ok()) << packed.error().message();
    auto sparse = quantize_weights(*packed, type, "w");
    ASSERT_TRUE(sparse.ok());
    EXPECT_EQ(sparse->packed.dtype(), quant_code_dtype(type));
    ASSERT_EQ(0, std::memcmp(sparse->scales.data(), expected.scales.data(), expected.scales.nbytes()));
    // Expand by the metadata: each stored code sits where the dense codes have it.
    const auto* meta = sparse->packed.meta.as<uint8_t>();
    const auto* codes = sparse->packed.values.as<uint8_t>();
    const auto* want = expected.codes.as<uint8_t>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t g = 0; g < sparse->packed.K_pad() / 4; ++g) {
        const int nibble = (meta[r * sparse->packed.meta_stride() + g / 2] >> (4 * (g % 2))) & 0xF;
        for (int s = 0; s < 2; ++s) {
          const int64_t k = 4 * g + (s == 0 ? (nibble & 3) : (nibble >> 2));
          const uint8_t code = codes[r * (sparse->packed.K_pad() / 2) + 2 * g + s];
          ASSERT_EQ(code, k < K ? want[r * K + k] : 0) << "row " << r << " k " << k;
        }
      }
    }
  }
}

TEST(Quantize, NonFiniteValuesAreErrors) {
  const auto tiers = test::tiers_under_test();
  if (tiers.empty()) GTEST_SKIP();
  for (IsaTier tier : tiers) {
    for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
      for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()}) {
        std::vector<float> values(4 * 70, 0.5f);
        values[2 * 70 + 65] = bad;
        values[3 * 70 + 1] = bad;  // a later row: the first bad row is reported
        Tensor x = Tensor::from_f32(values, {4, 70}, dtype);
        std::vector<uint8_t> codes(4 * 70);
        std::vector<float> scales(4);
        Status status = quantize_rows_with(cpu::kernels_for(tier).quant, x.view(), QuantType::Int8,
                                           nullptr, reinterpret_cast<std::byte*>(codes.data()), 70,
                                           scales.data(), "model.act");
        ASSERT_FALSE(status.ok());
        const std::string& msg = status.error().message();
        EXPECT_NE(msg.find("'model.act'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("row 2, column 65"), std::string::npos) << msg;
        EXPECT_NE(msg.find(std::isnan(bad) ? "nan" : "inf"), std::string::npos) << msg;
      }
    }
  }
}

TEST(Quantize, BadArguments) {
  if (!active_tier().ok()) GTEST_SKIP();
  Tensor three_d = Tensor::zeros(DType::F32, {2, 2, 2});
  EXPECT_FALSE(quantize_tokens(three_d.view(), QuantType::Int8, "x").ok());
  Tensor ints = Tensor::zeros(DType::I32, {2, 2});
  auto r = quantize_tokens(ints.view(), QuantType::Int8, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("I32"), std::string::npos) << r.error().message();
  Tensor x = Tensor::zeros(DType::F32, {2, 16});
  auto g = SlideGeometry::make(Pattern{6, 8}, 24, 32);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(quantize_lift(x.view(), *g, QuantType::Int8, "x").ok());
  std::vector<std::byte> codes(64);
  std::vector<float> scales(2);
  EXPECT_FALSE(quantize_tokens_into(x.view(), QuantType::Int8, nullptr, codes.data(), 15, scales.data(), "x").ok());
  // Zero rows: scale 1, codes 0, in every form.
  auto zeros = quantize_tokens(x.view(), QuantType::E4M3, "x");
  ASSERT_TRUE(zeros.ok());
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(zeros->codes.as<uint8_t>()[i], 0);
  EXPECT_EQ(zeros->scales.as<float>()[0], 1.0f);
  EXPECT_EQ(*quant_type_from_name("int8"), QuantType::Int8);
  EXPECT_EQ(*quant_type_from_name("e4m3"), QuantType::E4M3);
  EXPECT_EQ(*quant_type_from_name("fp8"), QuantType::E4M3);
  const auto bad = quant_type_from_name("int4");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(bad.error().message(), "unknown quantization type 'int4' (expected int8 or e4m3; fp8 means e4m3)");
}

}  // namespace
}  // namespace nmkit
