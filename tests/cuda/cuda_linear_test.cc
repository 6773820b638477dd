// The GPU path without and with a GPU (docs/design.md section 14):
//   CudaPlan, CusparseLt.Loads: host-only, run in CI (the backend and tile rules; cuSPARSELt's
//     library and every entry point nmkit calls);
//   CudaLinear.*: CudaSparseLinear against the CPU references, skipped without a CUDA device of
//     sm_80 or later (scripts/gpu_check.sh runs them on a lent GPU). INT8 is compared bit for bit
//     (integer sums, the same epilogue operations in the same order); E4M3 within a bound derived
//     from the tensor cores' accumulation. Every backend and every CUTLASS tile built is run on
//     each shape, and a shape's mismatches are counted and reported without stopping the others,
//     so one run on a lent GPU says everything.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "cuda/cuda_layer.h"
#include "cuda/cuda_plan.h"
#include "cuda/library_gemm.h"
#include "cuda/sparse_gemm.h"
#include "nmkit/cuda_linear.h"
#include "nmkit/prune.h"
#include "nmkit/quant_linear.h"
#include "nmkit/slide.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

using cuda::SparseTile;

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

// The tile rule of cuda_plan.h on an H100's 132 multiprocessors.
TEST(CudaPlan, SparseTileRule) {
  using cuda::choose_sparse_tile;
  const std::vector<SparseTile> all{SparseTile::k128x128, SparseTile::k128x256, SparseTile::k256x128};
  EXPECT_EQ(choose_sparse_tile(4096, 2048, 132, all), SparseTile::k256x128);  // 16 x 16 tiles
  EXPECT_EQ(choose_sparse_tile(4096, 1024, 132, all), SparseTile::k128x128);  // 16 x 8 and 32 x 4 < 132
  EXPECT_EQ(choose_sparse_tile(256, 8192 * 4, 132, all), SparseTile::k256x128);
  EXPECT_EQ(choose_sparse_tile(128, 8192 * 8, 132, all), SparseTile::k128x256);  // a 256-row tile: half padding
  EXPECT_EQ(choose_sparse_tile(384, 16384, 132, all), SparseTile::k128x256);   // 256-row tiles: 1/3 more
  EXPECT_EQ(choose_sparse_tile(4096 + 128, 8192, 132, all), SparseTile::k256x128);  // 256-row tiles: 1/32 more
  EXPECT_EQ(choose_sparse_tile(4096, 16, 132, all), SparseTile::k128x128);
  EXPECT_EQ(choose_sparse_tile(8192, 8192, 132, {SparseTile::k128x128}), SparseTile::k128x128);
  EXPECT_EQ(cuda::sparse_tile_name(SparseTile::k256x128), "256x128x128");
  EXPECT_EQ(cuda::int8_tiles_built().front(), SparseTile::k128x128);
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

bool have_cusparselt() { return cuda::CusparseLtGemm::load().ok(); }

// A [rows, K] f32 weight pruned to `pattern` by magnitude.
Tensor pruned_weight(int64_t rows, int64_t K, Pattern pattern, uint64_t seed) {
  Tensor w = test::random_tensor(DType::F32, {rows, K}, seed);
  auto p = prune(w.view(), pattern, PruneMethod::Magnitude);
  NMKIT_ASSERT(p.ok());
  return std::move(p->pruned);
}

// Y of x through the layer, into a y poisoned with NaN bits (every element must be written); with
// a tile, the call's stages are run by hand with that CUTLASS tile.
Result<Tensor> run_layer(const CudaSparseLinear& layer, const Tensor& x, std::optional<SparseTile> tile = {}) {
  const int64_t M = x.rows();
  Tensor y = Tensor::empty(DType::F32, {M, layer.rows()});
  cuda::DeviceBuffer dx, dy;
  NMKIT_TRY(dx.upload(x.data(), x.nbytes()));
  NMKIT_TRY(dy.reserve(y.nbytes()));
  if (cudaMemset(dy.ptr, 0xFF, y.nbytes()) != cudaSuccess) return Error("cudaMemset failed");
  if (!tile) {
    NMKIT_TRY(layer.apply_device(dx.ptr, x.dtype(), M, dy.as<float>()));
  } else {
    const cuda::CudaLayer& l = layer.layer();
    std::lock_guard<std::mutex> lock(l.scratch);
    NMKIT_TRY(l.reserve(M));
    NMKIT_TRY(l.quantize(dx.ptr, x.dtype(), M, nullptr));
    NMKIT_TRY(l.gemm(M, nullptr, tile));
    NMKIT_TRY(l.epilogue(M, dy.as<float>(), nullptr));
    auto bad = l.first_bad_row(M, nullptr);
    if (!bad.ok()) return bad.error();
  }
  if (cudaMemcpy(y.data(), dy.ptr, y.nbytes(), cudaMemcpyDeviceToHost) != cudaSuccess) {
    return Error("cudaMemcpy failed");
  }
  return y;
}

// got == want bit for bit; on failure, how many elements differ and the first few.
::testing::AssertionResult bits_equal(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure() << "shape " << shape_str(got.shape()) << " vs " << shape_str(want.shape());
  }
  const int64_t rows = want.cols();
  int64_t bad = 0, nonzero = 0;
  std::string first;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float g = got.as<float>()[i], w = want.as<float>()[i];
    nonzero += w != 0.0f;
    if (std::memcmp(&g, &w, 4) == 0) continue;
    if (++bad <= 4) {
      first += " (token " + std::to_string(i / rows) + ", row " + std::to_string(i % rows) + ": " + std::to_string(g) +
               " vs " + std::to_string(w) + ")";
    }
  }
  if (bad > 0) return ::testing::AssertionFailure() << bad << " of " << want.numel() << " elements differ:" << first;
  if (nonzero <= want.numel() / 2) return ::testing::AssertionFailure() << "the expected result is mostly zero";
  return ::testing::AssertionSuccess();
}

// The layer's Y for x (with each CUTLASS tile built, for a CUTLASS layer) equals `want` bit for bit.
void expect_layer_bits(const Result<CudaSparseLinear>& layer, const Tensor& x, const Result<Tensor>& want) {
  ASSERT_TRUE(layer.ok()) << layer.error().message();
  ASSERT_TRUE(want.ok()) << want.error().message();
  std::vector<std::optional<SparseTile>> tiles{std::nullopt};
  if (layer->backend() == CudaBackend::Cutlass && layer->quant_type() == QuantType::Int8) {
    for (const SparseTile t : cuda::int8_tiles_built()) tiles.emplace_back(t);
  }
  for (const auto& tile : tiles) {
    const std::string what =
        layer->kernel_name() + ", " + (tile ? cuda::sparse_tile_name(*tile) : layer->gemm_name(x.rows()));
    auto got = run_layer(*layer, x, tile);
    ASSERT_TRUE(got.ok()) << what << ": " << got.error().message();
    EXPECT_TRUE(bits_equal(*got, *want)) << what;
  }
}

std::vector<CudaBackend> sparse_backends() {
  std::vector<CudaBackend> out{CudaBackend::Cutlass};
  if (have_cusparselt()) out.push_back(CudaBackend::CusparseLt);
  return out;
}

struct LayerShape {
  int64_t M, rows, K;
};
// Every token count of {1, 15, 17, 100} with every row count of {16, 20, 48} (not multiples of 32;
// 20 not of 16 either), K cycling through {64, 100, 576, 4097} (none a multiple of 128); and two
// larger shapes.
std::vector<LayerShape> layer_shapes() {
  std::vector<LayerShape> out;
  const int64_t Ks[] = {64, 100, 576, 4097};
  int i = 0;
  for (const int64_t M : {1, 15, 17, 100}) {
    for (const int64_t rows : {16, 20, 48}) out.push_back({M, rows, Ks[i++ % 4]});
  }
  out.push_back({256, 256, 576});
  out.push_back({33, 128, 1000});
  return out;
}

std::string shape_trace(uint64_t seed, const LayerShape& s) {
  return test::seed_trace(seed) + " M " + std::to_string(s.M) + " rows " + std::to_string(s.rows) + " K " +
         std::to_string(s.K);
}

TEST(CudaLinear, Int8Sparse24EqualsCpuBitForBit) {
  NMKIT_NEED_GPU();
  uint64_t seed = 2700;
  for (const LayerShape& s : layer_shapes()) {
    SCOPED_TRACE(shape_trace(++seed, s));
    const Tensor w = pruned_weight(s.rows, s.K, {2, 4}, seed);
    const Tensor x = test::random_tensor(DType::F32, {s.M, s.K}, seed + 1, -4.0f, 4.0f);
    const Tensor bias = test::random_tensor(DType::F32, {s.rows}, seed + 2);
    auto packed = compress_sparse24(w.view());
    ASSERT_TRUE(packed.ok());
    auto qx = quantize_tokens(x.view(), QuantType::Int8);
    auto qw = quantize_weights(*packed, QuantType::Int8);
    ASSERT_TRUE(qx.ok() && qw.ok());
    for (const CudaBackend backend : sparse_backends()) {
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
  uint64_t seed = 10;
  for (const LayerShape& s : {LayerShape{33, 64, 300}, LayerShape{1, 20, 4097}, LayerShape{17, 48, 100}}) {
    SCOPED_TRACE(shape_trace(++seed, s));
    const Tensor w = test::random_tensor(DType::F32, {s.rows, s.K}, seed);
    const Tensor x = test::random_tensor(DType::F32, {s.M, s.K}, seed + 100);
    expect_layer_bits(CudaSparseLinear::dense(w.view()), x,
                      ref_quant_linear(*quantize_tokens(x.view(), QuantType::Int8),
                                       *quantize_weights(w.view(), QuantType::Int8)));
  }
}

// SlideSparse end to end: a 6:8 weight slid to 2:4 runs on the sparse kernels with X lifted on the
// GPU, and gives the dense 6:8 INT8 result bit for bit (docs/design.md 5: integer sums are exact).
TEST(CudaLinear, Slid68EqualsDense68Int8) {
  NMKIT_NEED_GPU();
  for (const int64_t K : {64, 100, 1000}) {
    for (const CudaBackend backend : sparse_backends()) {
      SCOPED_TRACE("K " + std::to_string(K) + " " + std::string(cuda_backend_name(backend)));
      const int64_t rows = K == 100 ? 48 : 32;
      const Tensor w = pruned_weight(rows, K, {6, 8}, 68 + static_cast<uint64_t>(K));
      const Tensor x = test::random_tensor(DType::F32, {19, K}, 86);
      auto slid = slide(w.view(), Pattern{6, 8});
      ASSERT_TRUE(slid.ok());
      expect_layer_bits(CudaSparseLinear::slid(slid->weight.view(), slid->geometry, {QuantType::Int8, backend}), x,
                        ref_quant_linear(*quantize_tokens(x.view(), QuantType::Int8),
                                         *quantize_weights(w.view(), QuantType::Int8)));
    }
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
  auto got = run_layer(*layer, x);
  ASSERT_TRUE(want.ok() && got.ok()) << (got.ok() ? "" : got.error().message());
  const Tensor dense_w = decompress(qw->packed);
  const int64_t K = 1000, steps = (K + 63) / 64;
  int64_t bad = 0;
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
      const double got_v = got->as<float>()[m * 64 + r];
      if (!(std::fabs(got_v - want_v) <= bound) && ++bad <= 3) {
        ADD_FAILURE() << layer->kernel_name() << ": token " << m << ", row " << r << ": " << got_v << " vs " << want_v
                      << " (bound " << bound << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0) << "elements outside the bound";
}

// The quantize kernel reports a non-finite activation, whatever GEMM follows.
TEST(CudaLinear, NonFiniteActivationNamesRowAndColumn) {
  NMKIT_NEED_GPU();
  const Tensor w = pruned_weight(16, 40, {2, 4}, 9);
  std::vector<Result<CudaSparseLinear>> layers;
  layers.push_back(CudaSparseLinear::dense(w.view()));
  for (const CudaBackend backend : sparse_backends()) {
    layers.push_back(CudaSparseLinear::sparse24(*compress_sparse24(w.view()), {QuantType::Int8, backend}));
  }
  Tensor x = test::random_tensor(DType::F32, {5, 40}, 10);
  x.as<float>()[3 * 40 + 17] = NAN;
  x.as<float>()[4 * 40 + 2] = INFINITY;
  for (const auto& layer : layers) {
    ASSERT_TRUE(layer.ok()) << layer.error().message();
    SCOPED_TRACE(layer->kernel_name());
    auto y = layer->apply(x.view());
    ASSERT_FALSE(y.ok());
    EXPECT_EQ(y.error().row(), 3);
    EXPECT_EQ(y.error().column(), 17);
  }
}

}  // namespace
}  // namespace nmkit
