#include "cuda/device_layout.h"

#include "cuda/sparse_gemm.h"
#include "cuda/weight_padding.h"
#include "nmkit/cutlass_sm80.h"

namespace nmkit::cuda {

int64_t gemm_rows(CudaBackend backend, int64_t rows) {
  switch (backend) {
    case CudaBackend::Cutlass: return round_up(rows, 16);
    case CudaBackend::CusparseLt: return round_up(rows, 32);
    default: return rows;
  }
}

GemmGeometry gemm_geometry(CudaBackend backend, int64_t rows, int64_t K_x, int64_t M) {
  GemmGeometry g;
  g.rows_gemm = gemm_rows(backend, rows);
  g.K_x = K_x;
  switch (backend) {
    case CudaBackend::Cutlass:
      g.tokens_gemm = round_up(M, 16);
      g.acc = kSparseGemmAccRowsMajor ? AccLayout{true, g.tokens_gemm} : AccLayout{false, g.rows_gemm};
      break;
    case CudaBackend::CusparseLt:
      g.tokens_gemm = round_up(M, 32);
      g.acc = {false, g.rows_gemm};
      break;
    default:
      g.tokens_gemm = M;
      g.acc = {false, g.rows_gemm};
      break;
  }
  return g;
}

Result<StagedWeight> stage_weight(CudaBackend backend, const Tensor& codes, const Sparse24* sparse, int64_t K_x) {
  StagedWeight out;
  if (backend == CudaBackend::Cutlass) {
    NMKIT_ASSERT(sparse != nullptr);
    auto layout = to_cutlass_sm80(pad_sparse24(*sparse, K_x), "weight");
    if (!layout.ok()) return layout.error();
    NMKIT_ASSERT(layout->rows_pad() == gemm_rows(backend, codes.rows()) && layout->K_pad() == K_x);
    out.values = std::move(layout->values);
    out.meta = std::move(layout->meta);
  } else {
    out.dense = pad_codes(codes, K_x, gemm_rows(backend, codes.rows()));
  }
  return out;
}

}  // namespace nmkit::cuda
