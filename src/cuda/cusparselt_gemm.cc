// cuSPARSELt loaded at run time (library_gemm.h): the entry points through dlsym into one table,
// typed from the header of the version nmkit builds against (0.10.0), so a library that lacks one
// fails load() with its name rather than at the first call.
#include <cusparseLt.h>
#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cuda/cuda_status.h"
#include "cuda/library_gemm.h"

#ifndef NMKIT_CUSPARSELT_FALLBACK
#define NMKIT_CUSPARSELT_FALLBACK ""
#endif

namespace nmkit::cuda {
namespace {

#define NMKIT_CUSPARSELT_ENTRY_POINTS(X)                                                             \
  X(cusparseLtInit) X(cusparseLtDestroy) X(cusparseLtDenseDescriptorInit)                          \
  X(cusparseLtStructuredDescriptorInit) X(cusparseLtMatDescriptorDestroy)                          \
  X(cusparseLtMatmulDescriptorInit) X(cusparseLtMatmulAlgSelectionInit)                            \
  X(cusparseLtMatmulAlgSelectionDestroy) X(cusparseLtMatmulPlanInit) X(cusparseLtMatmulPlanDestroy) \
  X(cusparseLtMatmulGetWorkspace) X(cusparseLtMatmul) X(cusparseLtSpMMACompressedSize)             \
  X(cusparseLtSpMMACompress) X(cusparseLtGetErrorName)

struct Api {
#define NMKIT_DECLARE(name) decltype(&::name) name = nullptr;
  NMKIT_CUSPARSELT_ENTRY_POINTS(NMKIT_DECLARE)
#undef NMKIT_DECLARE
  std::string path;
};

Result<const Api*> api() {
  static std::once_flag once;
  static Api table;
  static std::optional<Error> failure;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("NMKIT_CUSPARSELT"); env != nullptr && *env != '\0') {
      candidates.emplace_back(env);
    } else {
      candidates = {"libcusparseLt.so.0", NMKIT_CUSPARSELT_FALLBACK};
    }
    void* lib = nullptr;
    std::string tried;
    for (const std::string& path : candidates) {
      if (path.empty()) continue;
      lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) {
        table.path = path;
        break;
      }
      tried += (tried.empty() ? "" : "; ") + std::string(dlerror());
    }
    if (lib == nullptr) {
      failure = Error(ErrorCode::NotFound, "cuSPARSELt: cannot load libcusparseLt.so.0 (" + tried +
                                               "); set NMKIT_CUSPARSELT to its path");
      return;
    }
#define NMKIT_RESOLVE(name)                                                                        \
  table.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));                             \
  if (table.name == nullptr && !failure) {                                                         \
    failure = Error(ErrorCode::Unsupported, "cuSPARSELt: " + table.path + " has no " #name);       \
  }
    NMKIT_CUSPARSELT_ENTRY_POINTS(NMKIT_RESOLVE)
#undef NMKIT_RESOLVE
  });
  if (failure) return *failure;
  return &table;
}

Status sparselt_status(const Api& lt, cusparseStatus_t status, const char* what) {
  if (status == CUSPARSE_STATUS_SUCCESS) return ok_status();
  return Error(ErrorCode::Unsupported, std::string("cuSPARSELt: ") + what + ": " + lt.cusparseLtGetErrorName(status));
}
#define NMKIT_LT_TRY(call) NMKIT_TRY(sparselt_status(*lt, lt->call, #call))

}  // namespace

// Descriptors and plans of one weight: A (the 2:4 weight, rows x K row-major), and per token count
// B (X codes: K x tokens column-major) and C = D (rows x tokens column-major, i.e. Y's layout).
struct CusparseLtGemm::State {
  const Api* lt = nullptr;
  cusparseLtHandle_t handle{};
  bool handle_ready = false;
  int64_t rows = 0, K = 0;
  bool e4m3 = false;
  void* compressed = nullptr;
  struct Plan {
    cusparseLtMatDescriptor_t a{}, b{}, d{};
    cusparseLtMatmulDescriptor_t matmul{};
    cusparseLtMatmulAlgSelection_t selection{};
    cusparseLtMatmulPlan_t plan{};
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
  };
  std::map<int64_t, std::unique_ptr<Plan>> plans;

  Status plan_for(int64_t tokens, std::unique_ptr<Plan>& out) {
    auto p = std::make_unique<Plan>();
    const cudaDataType in = e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8I;
    const cudaDataType acc = e4m3 ? CUDA_R_32F : CUDA_R_32I;
    NMKIT_LT_TRY(cusparseLtStructuredDescriptorInit(&handle, &p->a, rows, K, K, 16, in, CUSPARSE_ORDER_ROW,
                                                    CUSPARSELT_SPARSITY_50_PERCENT));
    NMKIT_LT_TRY(cusparseLtDenseDescriptorInit(&handle, &p->b, K, tokens, K, 16, in, CUSPARSE_ORDER_COL));
    NMKIT_LT_TRY(cusparseLtDenseDescriptorInit(&handle, &p->d, rows, tokens, rows, 16, acc, CUSPARSE_ORDER_COL));
    NMKIT_LT_TRY(cusparseLtMatmulDescriptorInit(&handle, &p->matmul, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                CUSPARSE_OPERATION_NON_TRANSPOSE, &p->a, &p->b, &p->d, &p->d,
                                                e4m3 ? CUSPARSE_COMPUTE_32F : CUSPARSE_COMPUTE_32I));
    NMKIT_LT_TRY(cusparseLtMatmulAlgSelectionInit(&handle, &p->selection, &p->matmul, CUSPARSELT_MATMUL_ALG_DEFAULT));
    NMKIT_LT_TRY(cusparseLtMatmulPlanInit(&handle, &p->plan, &p->matmul, &p->selection));
    NMKIT_LT_TRY(cusparseLtMatmulGetWorkspace(&handle, &p->plan, &p->workspace_bytes));
    if (p->workspace_bytes > 0) NMKIT_CUDA_TRY(cudaMalloc(&p->workspace, p->workspace_bytes));
    out = std::move(p);
    return ok_status();
  }

  ~State() {
    for (auto& [tokens, p] : plans) {
      lt->cusparseLtMatmulPlanDestroy(&p->plan);
      lt->cusparseLtMatmulAlgSelectionDestroy(&p->selection);
      lt->cusparseLtMatDescriptorDestroy(&p->a);
      lt->cusparseLtMatDescriptorDestroy(&p->b);
      lt->cusparseLtMatDescriptorDestroy(&p->d);
      if (p->workspace != nullptr) cudaFree(p->workspace);
    }
    if (compressed != nullptr) cudaFree(compressed);
    if (handle_ready) lt->cusparseLtDestroy(&handle);
  }
};

Result<std::string> CusparseLtGemm::load() {
  auto lt = api();
  if (!lt.ok()) return lt.error();
  return (*lt)->path;
}

Result<std::unique_ptr<CusparseLtGemm>> CusparseLtGemm::make(const void* dense_w, int64_t rows, int64_t K, bool e4m3,
                                                             cudaStream_t stream) {
  auto loaded = api();
  if (!loaded.ok()) return loaded.error();
  const Api* lt = *loaded;
  std::unique_ptr<CusparseLtGemm> gemm(new CusparseLtGemm());
  gemm->state_ = std::make_unique<State>();
  State& s = *gemm->state_;
  s.lt = lt;
  s.rows = rows;
  s.K = K;
  s.e4m3 = e4m3;
  NMKIT_LT_TRY(cusparseLtInit(&s.handle));
  s.handle_ready = true;
  // The compressed size and the compression need a plan; any token count (a multiple of 32,
  // cuda_sparse_linear.cc) gives the same A.
  std::unique_ptr<State::Plan> plan;
  NMKIT_TRY(s.plan_for(32, plan));
  size_t compressed_bytes = 0, buffer_bytes = 0;
  NMKIT_LT_TRY(cusparseLtSpMMACompressedSize(&s.handle, &plan->plan, &compressed_bytes, &buffer_bytes));
  NMKIT_CUDA_TRY(cudaMalloc(&s.compressed, compressed_bytes));
  void* buffer = nullptr;
  if (buffer_bytes > 0) NMKIT_CUDA_TRY(cudaMalloc(&buffer, buffer_bytes));
  const cusparseStatus_t status = lt->cusparseLtSpMMACompress(&s.handle, &plan->plan, dense_w, s.compressed, buffer,
                                                              stream);
  cudaStreamSynchronize(stream);
  if (buffer != nullptr) cudaFree(buffer);
  NMKIT_TRY(sparselt_status(*lt, status, "cusparseLtSpMMACompress"));
  s.plans.emplace(32, std::move(plan));
  return gemm;
}

CusparseLtGemm::~CusparseLtGemm() = default;

Status CusparseLtGemm::run(int64_t tokens, const void* x, void* acc, cudaStream_t stream) {
  State& s = *state_;
  const Api* lt = s.lt;
  auto& plan = s.plans[tokens];
  if (plan == nullptr) NMKIT_TRY(s.plan_for(tokens, plan));
  const float alpha = 1.0f, beta = 0.0f;  // the scales follow in epilogue.cu
  NMKIT_LT_TRY(cusparseLtMatmul(&s.handle, &plan->plan, &alpha, s.compressed, x, &beta, acc, acc, plan->workspace,
                                &stream, 1));
  return ok_status();
}

}  // namespace nmkit::cuda
