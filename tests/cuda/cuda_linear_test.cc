// The GPU path without and with a GPU (docs/design.md section 14):
//   CudaPlan, CusparseLt.Loads: host-only, run in CI (the backend rules; cuSPARSELt's library and
//     every entry point nmkit calls);
//   CudaLinear.*: CudaSparseLinear against the CPU references, skipped without a CUDA device of
//     sm_80 or later (scripts/gpu_check.sh runs them on a lent GPU). INT8 is compared bit for bit
//     (integer sums, the same epilogue operations in the same order); E4M3 within a bound derived
//     from the tensor cores' accumulation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cuda/cuda_plan.h"
#include "cuda/library_gemm.h"
#include "nmkit/cuda_linear.h"
#include "nmkit/prune.h"
#include "nmkit/quant_linear.h"
#include "nmkit/slide.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

TEST(CudaPlan, BackendRules) {
  using cuda::choose_backend;
  const auto S = WeightFormat::Sparse24, D = WeightFormat::Dense;
  const auto I8 = QuantType::Int8, F8 = QuantType::E4M3;
  EXPECT_EQ(*choose_backend(S, I8, CudaBackend::Auto, 80, true), CudaBackend::Cutlass);
  EXPECT_EQ(*choose_backend(S, I8, CudaBackend::Auto, 89, true), CudaBackend::Cutlass);
  EXPECT_EQ(*choose_backend(S, F8, CudaBackend::Auto, 90, true), CudaBackend::CusparseLt);
  EXPECT_EQ(*choose_backend(S, I8, CudaBackend::Auto, 90, false), CudaBackend::Cutlass);
  EXPECT_EQ(*choose_backend(D, F8, CudaBackend::Auto, 90, true), CudaBackend::CublasLt);
  EXPECT_EQ(*choose_backend(S, I8, CudaBackend::Cutlass, 90, true), CudaBackend::Cutlass);
  EXPECT_FALSE(choose_backend(S, F8, CudaBackend::Auto, 80, true).ok());        // fp8 needs sm_89
  EXPECT_FALSE(choose_backend(S, I8, CudaBackend::CusparseLt, 90, false).ok());  // not loaded
  EXPECT_FALSE(choose_backend(D, I8, CudaBackend::Cutlass, 90, true).ok());      // dense: cuBLASLt
  EXPECT_FALSE(choose_backend(S, I8, CudaBackend::CublasLt, 90, true).ok());
  EXPECT_FALSE(choose_backend(S, F8, CudaBackend::Cutlass, 90, true).ok());      // no FP8 mma.sp on Hopper
  EXPECT_FALSE(choose_backend(S, F8, CudaBackend::Auto, 90, false).ok());
  EXPECT_EQ(*choose_backend(S, F8, CudaBackend::Auto, 89, false), CudaBackend::Cutlass);
  for (const CudaBackend b : {CudaBackend::Auto, CudaBackend::Cutlass, CudaBackend::CusparseLt, CudaBackend::CublasLt}) {
    EXPECT_EQ(*cuda_backend_from_name(cuda_backend_name(b)), b);
  }
  EXPECT_FALSE(cuda_backend_from_name("cudnn").ok());
}

// cuSPARSELt is loaded at run time: the library scripts/setup_cuda.sh unpacked (or NMKIT_CUSPARSELT)
// opens and has every entry point; no GPU is needed for that.
TEST(CusparseLt, LoadsWithEveryEntryPoint) {
  auto path = cuda::CusparseLtGemm::load();
  ASSERT_TRUE(path.ok()) << path.error().message();
  EXPECT_NE(path->find("libcusparseLt.so.0"), std::string::npos) << *path;
}

bool have_gpu() { return cuda_device_count() > 0; }
#define NMKIT_NEED_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device of sm_80 or later"

// A [rows, K] f32 weight pruned to `pattern` by magnitude.
Tensor pruned_weight(int64_t rows, int64_t K, Pattern pattern, uint64_t seed) {
  Tensor w = test::random_tensor(DType::F32, {rows, K}, seed);
  auto p = prune(w.view(), pattern, PruneMethod::Magnitude);
  NMKIT_ASSERT(p.ok());
  return std::move(p->pruned);
}

void expect_bits_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  int64_t nonzero = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    ASSERT_EQ(0, std::memcmp(got.as<float>() + i, want.as<float>() + i, 4))
        << what << ": element " << i << " " << got.as<float>()[i] << " vs " << want.as<float>()[i];
    nonzero += want.as<float>()[i] != 0.0f;
  }
  EXPECT_GT(nonzero, want.numel() / 2) << what;
}

// The layer's Y for x equals `want` bit for bit.
void expect_layer_bits(const Result<CudaSparseLinear>& layer, const Tensor& x, const Result<Tensor>& want) {
  ASSERT_TRUE(layer.ok()) << layer.error().message();
  ASSERT_TRUE(want.ok()) << want.error().message();
  auto got = layer->apply(x.view());
  ASSERT_TRUE(got.ok()) << got.error().message();
  expect_bits_equal(*got, *want, layer->kernel_name());
}

struct Shape {
  int64_t M, rows, K;
};
const Shape kShapes[] = {{1, 16, 64}, {3, 32, 100}, {17, 48, 1000}, {100, 128, 4097}, {256, 256, 576}};

TEST(CudaLinear, Int8Sparse24EqualsCpuBitForBit) {
  NMKIT_NEED_GPU();
  uint64_t seed = 2700;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(test::seed_trace(++seed) + " M " + std::to_string(s.M) + " rows " + std::to_string(s.rows) +
                 " K " + std::to_string(s.K));
    const Tensor w = pruned_weight(s.rows, s.K, {2, 4}, seed);
    const Tensor x = test::random_tensor(DType::F32, {s.M, s.K}, seed + 1, -4.0f, 4.0f);
    const Tensor bias = test::random_tensor(DType::F32, {s.rows}, seed + 2);
    auto packed = compress_sparse24(w.view());
    ASSERT_TRUE(packed.ok());
    auto qx = quantize_tokens(x.view(), QuantType::Int8);
    auto qw = quantize_weights(*packed, QuantType::Int8);
    ASSERT_TRUE(qx.ok() && qw.ok());
    for (const CudaBackend backend : {CudaBackend::Cutlass, CudaBackend::CusparseLt}) {
      if (backend == CudaBackend::CusparseLt && !cuda::CusparseLtGemm::load().ok()) continue;
      SCOPED_TRACE(std::string(cuda_backend_name(backend)));
      auto layer = CudaSparseLinear::sparse24(*packed, {QuantType::Int8, backend});
      ASSERT_TRUE(layer.ok()) << layer.error().message();
      for (const bool with_bias : {false, true}) {
        SCOPED_TRACE(with_bias ? "with bias" : "without bias");
        if (with_bias) {
          ASSERT_TRUE(layer->set_bias(bias.view()).ok());
        }
        const TensorView b = bias.view();
        expect_layer_bits(layer, x, ref_quant_linear(*qx, *qw, with_bias ? &b : nullptr));
      }
    }
  }
}

TEST(CudaLinear, Int8DenseEqualsCpuBitForBit) {
  NMKIT_NEED_GPU();
  const Tensor w = test::random_tensor(DType::F32, {64, 300}, 11);
  const Tensor x = test::random_tensor(DType::F32, {33, 300}, 12);
  expect_layer_bits(CudaSparseLinear::dense(w.view()), x,
                    ref_quant_linear(*quantize_tokens(x.view(), QuantType::Int8), *quantize_weights(w.view(), QuantType::Int8)));
}

// SlideSparse end to end: a 6:8 weight slid to 2:4 runs on the sparse kernels with X lifted on the
// GPU, and gives the dense 6:8 INT8 result bit for bit (docs/design.md 5: integer sums are exact).
TEST(CudaLinear, Slid68EqualsDense68Int8) {
  NMKIT_NEED_GPU();
  for (const int64_t K : {64, 100, 1000}) {
    SCOPED_TRACE("K " + std::to_string(K));
    const Tensor w = pruned_weight(32, K, {6, 8}, 68 + static_cast<uint64_t>(K));
    const Tensor x = test::random_tensor(DType::F32, {19, K}, 86);
    auto slid = slide(w.view(), Pattern{6, 8});
    ASSERT_TRUE(slid.ok());
    expect_layer_bits(CudaSparseLinear::slid(slid->weight.view(), slid->geometry), x,
                      ref_quant_linear(*quantize_tokens(x.view(), QuantType::Int8), *quantize_weights(w.view(), QuantType::Int8)));
  }
}

// E4M3: every product of two e4m3 codes is exact in f32; the tensor cores add them in their own
// order and, on Ada and Hopper, keep fewer bits in the running sum than f32 (about 14 bits of
// mantissa have been reported for Hopper's FP8 accumulators). Bound per element: one rounding of
// 2^-13 relative per 64-K step of the MMA, on the sum of |products|, scaled; plus 2 f32 ulps of the
// epilogue's two multiplications.
TEST(CudaLinear, E4m3Sparse24WithinAccumulationBound) {
  NMKIT_NEED_GPU();
  auto probe = CudaSparseLinear::sparse24(*compress_sparse24(pruned_weight(16, 64, {2, 4}, 1).view()),
                                          {QuantType::E4M3});
  if (!probe.ok()) GTEST_SKIP() << probe.error().message();  // before sm_89
  const Tensor w = pruned_weight(64, 1000, {2, 4}, 4);
  const Tensor x = test::random_tensor(DType::F32, {40, 1000}, 5);
  auto packed = compress_sparse24(w.view());
  auto qx = quantize_tokens(x.view(), QuantType::E4M3);
  auto qw = quantize_weights(*packed, QuantType::E4M3);
  auto want = ref_quant_linear(*qx, *qw);
  auto layer = CudaSparseLinear::sparse24(*packed, {QuantType::E4M3});
  ASSERT_TRUE(layer.ok()) << layer.error().message();
  auto got = layer->apply(x.view());
  ASSERT_TRUE(want.ok() && got.ok()) << (got.ok() ? "" : got.error().message());
  const Tensor dense_w = decompress(qw->packed);
  const int64_t K = 1000, steps = (K + 63) / 64;
  for (int64_t m = 0; m < 40; ++m) {
    for (int64_t r = 0; r < 64; ++r) {
      double abs_sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        abs_sum += std::fabs(static_cast<double>(e4m3_to_f32(qx->codes.as<uint8_t>()[m * K + k])) *
                             e4m3_to_f32(dense_w.as<uint8_t>()[r * K + k]));
      }
      const double scale = static_cast<double>(qx->scales.as<float>()[m]) * qw->scales.as<float>()[r];
      const double want_v = want->as<float>()[m * 64 + r];
      const double bound = static_cast<double>(steps) * std::ldexp(1.0, -13) * abs_sum * scale +
                           2 * std::ldexp(std::fabs(want_v), -23);
      ASSERT_LE(std::fabs(got->as<float>()[m * 64 + r] - want_v), bound) << "token " << m << ", row " << r;
    }
  }
}

TEST(CudaLinear, NonFiniteActivationNamesRowAndColumn) {
  NMKIT_NEED_GPU();
  auto layer = CudaSparseLinear::sparse24(*compress_sparse24(pruned_weight(16, 40, {2, 4}, 9).view()));
  ASSERT_TRUE(layer.ok()) << layer.error().message();
  Tensor x = test::random_tensor(DType::F32, {5, 40}, 10);
  x.as<float>()[3 * 40 + 17] = NAN;
  auto y = layer->apply(x.view());
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.error().row(), 3);
  EXPECT_EQ(y.error().column(), 17);
}

}  // namespace
}  // namespace nmkit
