// cuBLASLt's dense INT8 / E4M3 GEMM to the accumulators (library_gemm.h): the TN layout, the
// heuristic's first algorithm with a 32 MiB workspace, one plan per token count.
#include <cublasLt.h>

#include <map>
#include <string>

#include "cuda/cuda_status.h"
#include "cuda/library_gemm.h"

namespace nmkit::cuda {
namespace {

Status cublas_status(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return ok_status();
  return Error(ErrorCode::Unsupported, std::string("cuBLASLt: ") + what + " returned status " +
                                           std::to_string(static_cast<int>(status)));
}
#define NMKIT_CUBLAS_TRY(call) NMKIT_TRY(cublas_status((call), #call))

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

}  // namespace

struct CublasLtGemm::State {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, std::unique_ptr<Plan>> plans;
  ~State() {
    plans.clear();
    if (workspace != nullptr) cudaFree(workspace);
    if (handle != nullptr) cublasLtDestroy(handle);
  }
};

Result<std::unique_ptr<CublasLtGemm>> CublasLtGemm::make() {
  std::unique_ptr<CublasLtGemm> gemm(new CublasLtGemm());
  gemm->state_ = std::make_unique<State>();
  NMKIT_CUBLAS_TRY(cublasLtCreate(&gemm->state_->handle));
  NMKIT_CUDA_TRY(cudaMalloc(&gemm->state_->workspace, kWorkspaceBytes));
  return gemm;
}

CublasLtGemm::~CublasLtGemm() = default;

Status CublasLtGemm::run(const LibraryGemmShape& s, const void* w, const void* x, void* acc, cudaStream_t stream) {
  auto& plan = state_->plans[{s.rows, s.tokens, s.K, s.e4m3}];
  if (plan == nullptr) {
    auto p = std::make_unique<Plan>();
    const cudaDataType in = s.e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8I;
    const cudaDataType out = s.e4m3 ? CUDA_R_32F : CUDA_R_32I;
    NMKIT_CUBLAS_TRY(cublasLtMatmulDescCreate(&p->op, s.e4m3 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32I, out));
    const cublasOperation_t transpose = CUBLAS_OP_T;
    NMKIT_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
    NMKIT_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->a, in, static_cast<uint64_t>(s.K), static_cast<uint64_t>(s.rows), s.K));
    NMKIT_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->b, in, static_cast<uint64_t>(s.K), static_cast<uint64_t>(s.tokens), s.K));
    NMKIT_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->d, out, static_cast<uint64_t>(s.rows), static_cast<uint64_t>(s.tokens), s.rows));
    cublasLtMatmulPreference_t preference = nullptr;
    NMKIT_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&preference));
    const size_t workspace = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                         sizeof(workspace));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(state_->handle, p->op, p->a, p->b, p->d, p->d, preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    NMKIT_TRY(cublas_status(status, "cublasLtMatmulAlgoGetHeuristic"));
    if (found == 0) return Error(ErrorCode::Unsupported, "cuBLASLt: no algorithm for this GEMM");
    p->algo = result.algo;
    plan = std::move(p);
  }
  const int32_t one_i = 1, zero_i = 0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const void* alpha = s.e4m3 ? static_cast<const void*>(&one_f) : &one_i;
  const void* beta = s.e4m3 ? static_cast<const void*>(&zero_f) : &zero_i;
  NMKIT_CUBLAS_TRY(cublasLtMatmul(state_->handle, plan->op, alpha, w, plan->a, x, plan->b, beta, acc, plan->d, acc,
                                  plan->d, &plan->algo, state_->workspace, kWorkspaceBytes, stream));
  return ok_status();
}

}  // namespace nmkit::cuda
