// Everything CudaSparseLinear hands its GEMMs and its scale kernel, run on the host (no GPU): for each
// backend, the weight bytes it uploads (src/cuda/device_layout.h stage_weight), X's codes as the
// quantizer leaves them (padded tokens hold garbage), the sizes, strides and accumulator layout of
// gemm_geometry, through CUTLASS's host reference GEMM (cutlass/util/reference/host/gemm.h; the
// CUTLASS weight through reorder_meta and uncompress) and the epilogue's own element rule and
// addressing (src/cuda/epilogue.h), equal bit for bit to the CPU's INT8 linear. Shapes: rows not a
// multiple of 16 or 32, K not a multiple of 128, one token, token counts either side of 16 and 32.
// What stays for a GPU is the inside of each library and kernel (tests/cuda/cuda_linear_test.cc).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cuda/device_layout.h"
#include "cuda/epilogue.h"
#include "cuda/weight_padding.h"
#include "cutlass/util/reference/host/gemm.h"
#include "nmkit/prune.h"
#include "nmkit/quant.h"
#include "nmkit/quant_linear.h"
#include "tests/cuda/cutlass_host.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// acc = W [rows_gemm, K_x] x X^T by CUTLASS's reference GEMM, D laid out as `Layout` with g's ld.
template <class Layout>
void reference_gemm(const cuda::GemmGeometry& g, std::vector<int8_t>& w, std::vector<int8_t>& x,
                    std::vector<int32_t>& acc) {
  cutlass::reference::host::Gemm<int8_t, cutlass::layout::RowMajor, int8_t, cutlass::layout::ColumnMajor, int32_t,
                                 Layout, int32_t, int32_t>
      gemm;
  cutlass::TensorRef<int8_t, cutlass::layout::RowMajor> a(w.data(), cutlass::layout::RowMajor(static_cast<int>(g.K_x)));
  cutlass::TensorRef<int8_t, cutlass::layout::ColumnMajor> b(x.data(),
                                                             cutlass::layout::ColumnMajor(static_cast<int>(g.K_x)));
  cutlass::TensorRef<int32_t, Layout> d(acc.data(), Layout(static_cast<int>(g.acc.ld)));
  gemm({static_cast<int>(g.rows_gemm), static_cast<int>(g.tokens_gemm), static_cast<int>(g.K_x)}, 1, a, b, 0, d);
}

TEST(GemmArgumentsOracle, EveryBackendGivesTheCpuResultBitForBit) {
  uint64_t seed = 2900;
  for (const int64_t rows : {16, 20, 48}) {
    for (const int64_t K : {64, 100, 1000, 4097}) {
      auto pruned = prune(test::random_tensor(DType::F32, {rows, K}, ++seed).view(), {2, 4}, PruneMethod::Magnitude);
      ASSERT_TRUE(pruned.ok());
      const Tensor& w = pruned->pruned;
      const Tensor bias = test::random_tensor(DType::F32, {rows}, seed + 1);
      auto qw = quantize_weights(*compress_sparse24(w.view()), QuantType::Int8);
      ASSERT_TRUE(qw.ok());
      const Tensor w_codes = decompress(qw->packed);
      const int64_t K_x = cuda::round_up(K, cuda::kAlignK);
      for (const int64_t M : {1, 15, 17, 100}) {
        const Tensor x = test::random_tensor(DType::F32, {M, K}, seed + 2 + static_cast<uint64_t>(M), -4.0f, 4.0f);
        auto qx = quantize_tokens(x.view(), QuantType::Int8);
        ASSERT_TRUE(qx.ok());
        const TensorView b = bias.view();
        auto want = ref_quant_linear(*qx, *qw, &b);
        ASSERT_TRUE(want.ok());
        for (const CudaBackend backend : {CudaBackend::Cutlass, CudaBackend::CusparseLt, CudaBackend::CublasLt}) {
          SCOPED_TRACE(test::seed_trace(seed) + " rows " + std::to_string(rows) + " K " + std::to_string(K) + " M " +
                       std::to_string(M) + " " + std::string(cuda_backend_name(backend)));
          const cuda::GemmGeometry g = cuda::gemm_geometry(backend, rows, K_x, M);
          ASSERT_GE(g.rows_gemm, rows);
          ASSERT_GE(g.tokens_gemm, M);
          auto staged = cuda::stage_weight(backend, w_codes, &qw->packed, K_x);
          ASSERT_TRUE(staged.ok()) << staged.error().message();
          // W as the GEMM reads it.
          std::vector<int8_t> w_gemm(static_cast<size_t>(g.rows_gemm * K_x));
          if (backend == CudaBackend::Cutlass) {
            CutlassSm80 layout;
            layout.rows = rows;
            layout.K = K_x;
            layout.values = std::move(staged->values);
            layout.meta = std::move(staged->meta);
            ASSERT_EQ(layout.rows_pad(), g.rows_gemm);
            const std::vector<uint8_t> dense =
                test::cutlass_dense<uint8_t, uint32_t>(cuda::pad_sparse24(qw->packed, K_x), layout);
            ASSERT_EQ(dense.size(), w_gemm.size());
            std::memcpy(w_gemm.data(), dense.data(), dense.size());
          } else {
            ASSERT_EQ(staged->dense.shape(), (Shape{g.rows_gemm, K_x}));
            std::memcpy(w_gemm.data(), staged->dense.data(), w_gemm.size());
          }
          // X's codes as the quantizer writes them (zeros past K), padded tokens left as garbage.
          std::vector<int8_t> x_gemm(static_cast<size_t>(g.tokens_gemm * K_x));
          std::mt19937 rng(static_cast<uint32_t>(seed));
          for (int8_t& c : x_gemm) c = static_cast<int8_t>(rng());
          for (int64_t m = 0; m < M; ++m) {
            std::memset(x_gemm.data() + m * K_x, 0, static_cast<size_t>(K_x));
            std::memcpy(x_gemm.data() + m * K_x, qx->codes.data() + m * K, static_cast<size_t>(K));
          }
          std::vector<int32_t> acc(static_cast<size_t>(g.acc_elements()), 0x5A5A5A5A);
          if (g.acc.rows_major) {
            reference_gemm<cutlass::layout::RowMajor>(g, w_gemm, x_gemm, acc);
          } else {
            reference_gemm<cutlass::layout::ColumnMajor>(g, w_gemm, x_gemm, acc);
          }
          // The scale kernel's element rule at the kernel's addresses.
          for (int64_t t = 0; t < M; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t at = cuda::acc_offset(g.acc, t, r);
              ASSERT_LT(at, g.acc_elements());
              const float y = cuda::scaled_output(static_cast<float>(acc[static_cast<size_t>(at)]),
                                                  qx->scales.as<float>()[t], qw->scales.as<float>()[r],
                                                  bias.as<float>(), r);
              const float expected = want->as<float>()[t * rows + r];
              ASSERT_EQ(0, std::memcmp(&y, &expected, 4)) << "token " << t << ", row " << r << ": " << y << " vs "
                                                            << expected;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace nmkit
