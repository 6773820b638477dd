// cuBLASLt's dense INT8 / E4M3 GEMM to the accumulators (library_gemm.h): the TN layout, a 32 MiB
// workspace, one plan per shape; the algorithm is the heuristic's first or, with `search`, the
// fastest of its first 8 on the first call's buffers.
#include <cublasLt.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

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
constexpr int kCandidates = 8;

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::string description;
  ~Plan() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

int algo_attribute(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  int value = -1;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written);
  return value;
}

}  // namespace

struct CublasLtGemm::State {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  bool search = false;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, std::unique_ptr<Plan>> plans;
  ~State() {
    plans.clear();
    if (workspace != nullptr) cudaFree(workspace);
    if (handle != nullptr) cublasLtDestroy(handle);
  }
};

Result<std::unique_ptr<CublasLtGemm>> CublasLtGemm::make(bool search) {
  std::unique_ptr<CublasLtGemm> gemm(new CublasLtGemm());
  gemm->state_ = std::make_unique<State>();
  gemm->state_->search = search;
  NMKIT_CUBLAS_TRY(cublasLtCreate(&gemm->state_->handle));
  NMKIT_CUDA_TRY(cudaMalloc(&gemm->state_->workspace, kWorkspaceBytes));
  return gemm;
}

CublasLtGemm::~CublasLtGemm() = default;

Status CublasLtGemm::run(const LibraryGemmShape& s, const void* w, const void* x, void* acc, cudaStream_t stream) {
  State& st = *state_;
  const int32_t one_i = 1, zero_i = 0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const void* alpha = s.e4m3 ? static_cast<const void*>(&one_f) : &one_i;
  const void* beta = s.e4m3 ? static_cast<const void*>(&zero_f) : &zero_i;
  auto matmul = [&](const Plan& p, const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(st.handle, p.op, alpha, w, p.a, x, p.b, beta, acc, p.d, acc, p.d, &algo, st.workspace,
                          kWorkspaceBytes, stream);
  };
  auto& plan = st.plans[{s.rows, s.tokens, s.K, s.e4m3}];
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
    cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(st.handle, p->op, p->a, p->b, p->d, p->d, preference,
                                                                 st.search ? kCandidates : 1, results, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    NMKIT_TRY(cublas_status(status, "cublasLtMatmulAlgoGetHeuristic"));
    if (found == 0) return Error(ErrorCode::Unsupported, "cuBLASLt: no algorithm for this GEMM");
    int best = 0;
    if (found > 1) {  // time each candidate: 2 warm-up calls, then the median of 5
      cudaEvent_t start = nullptr, stop = nullptr;
      NMKIT_CUDA_TRY(cudaEventCreate(&start));
      NMKIT_CUDA_TRY(cudaEventCreate(&stop));
      float best_ms = 0;
      for (int i = 0; i < found; ++i) {
        std::vector<float> ms;
        bool ok = true;
        for (int rep = 0; rep < 7 && ok; ++rep) {
          cudaEventRecord(start, stream);
          ok = matmul(*p, results[i].algo) == CUBLAS_STATUS_SUCCESS;
          cudaEventRecord(stop, stream);
          cudaEventSynchronize(stop);
          float t = 0;
          cudaEventElapsedTime(&t, start, stop);
          if (rep >= 2) ms.push_back(t);
        }
        if (!ok) continue;
        std::sort(ms.begin(), ms.end());
        if (best_ms == 0 || ms[ms.size() / 2] < best_ms) {
          best_ms = ms[ms.size() / 2];
          best = i;
        }
      }
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      NMKIT_CUDA_TRY(cudaGetLastError());
    }
    p->algo = results[best].algo;
    p->description = "cuBLASLt algo " + std::to_string(algo_attribute(p->algo, CUBLASLT_ALGO_CONFIG_ID)) + " tile " +
                     std::to_string(algo_attribute(p->algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) + " split-K " +
                     std::to_string(algo_attribute(p->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + " (heuristic's #" +
                     std::to_string(best + 1) + " of " + std::to_string(found) + (found > 1 ? " timed)" : ")");
    plan = std::move(p);
  }
  NMKIT_CUBLAS_TRY(matmul(*plan, plan->algo));
  return ok_status();
}

std::string CublasLtGemm::describe(const LibraryGemmShape& s) const {
  auto it = state_->plans.find({s.rows, s.tokens, s.K, s.e4m3});
  return it == state_->plans.end() || it->second == nullptr ? std::string() : it->second->description;
}

}  // namespace nmkit::cuda
