// CusparseLtGemm (library_gemm.h): one 2:4 weight compressed by cuSPARSELt on the device, and a
// plan per token count, through the run-time loaded library (cusparselt_api.h).
#include <map>
#include <string>

#include "cuda/cuda_status.h"
#include "cuda/cusparselt_api.h"
#include "cuda/library_gemm.h"

namespace nmkit::cuda {
namespace {

// Bytes after the compressed weight that a kernel may read: more than one tile's values and
// metadata of the largest sparse INT8 / E4M3 tile (256 x 256 x 256).
constexpr size_t kCompressedSlack = size_t{256} << 10;

}  // namespace

// Descriptors and plans of one weight: A (the 2:4 weight, rows x K row-major), and per token count
// B (X codes: K x tokens column-major) and C = D (rows x tokens column-major, i.e. Y's layout).
struct CusparseLtGemm::State {
  const CusparseLtApi* lt = nullptr;
  cusparseLtHandle_t handle{};
  bool handle_ready = false;
  int64_t rows = 0, K = 0;
  bool e4m3 = false, search = false;
  void* compressed = nullptr;
  struct Plan {
    const CusparseLtApi* lt = nullptr;
    cusparseLtMatDescriptor_t a{}, b{}, d{};
    cusparseLtMatmulDescriptor_t matmul{};
    cusparseLtMatmulAlgSelection_t selection{};
    cusparseLtMatmulPlan_t plan{};
    int ready = 0;  // how many of the objects above exist, in that order
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    std::string description;
    ~Plan() {
      if (ready >= 6) lt->cusparseLtMatmulPlanDestroy(&plan);
      if (ready >= 5) lt->cusparseLtMatmulAlgSelectionDestroy(&selection);
      if (ready >= 3) lt->cusparseLtMatDescriptorDestroy(&d);
      if (ready >= 2) lt->cusparseLtMatDescriptorDestroy(&b);
      if (ready >= 1) lt->cusparseLtMatDescriptorDestroy(&a);
      if (workspace != nullptr) cudaFree(workspace);
    }
  };
  std::map<int64_t, std::unique_ptr<Plan>> plans;

  // The plan of `tokens` with the default algorithm (ready to run once its workspace is there).
  Status init_plan(int64_t tokens, Plan& p) {
    p.lt = lt;
    const cudaDataType in = e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8I;
    const cudaDataType acc = e4m3 ? CUDA_R_32F : CUDA_R_32I;
    NMKIT_LT_TRY(cusparseLtStructuredDescriptorInit(&handle, &p.a, rows, K, K, 16, in, CUSPARSE_ORDER_ROW,
                                                    CUSPARSELT_SPARSITY_50_PERCENT));
    p.ready = 1;
    NMKIT_LT_TRY(cusparseLtDenseDescriptorInit(&handle, &p.b, K, tokens, K, 16, in, CUSPARSE_ORDER_COL));
    p.ready = 2;
    NMKIT_LT_TRY(cusparseLtDenseDescriptorInit(&handle, &p.d, rows, tokens, rows, 16, acc, CUSPARSE_ORDER_COL));
    p.ready = 3;
    NMKIT_LT_TRY(cusparseLtMatmulDescriptorInit(&handle, &p.matmul, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                CUSPARSE_OPERATION_NON_TRANSPOSE, &p.a, &p.b, &p.d, &p.d,
                                                e4m3 ? CUSPARSE_COMPUTE_32F : CUSPARSE_COMPUTE_32I));
    p.ready = 4;
    NMKIT_LT_TRY(cusparseLtMatmulAlgSelectionInit(&handle, &p.selection, &p.matmul, CUSPARSELT_MATMUL_ALG_DEFAULT));
    p.ready = 5;
    NMKIT_LT_TRY(cusparseLtMatmulPlanInit(&handle, &p.plan, &p.matmul, &p.selection));
    p.ready = 6;
    return ok_status();
  }

  // Workspace for the plan's current algorithm (the one it has is kept when large enough).
  Status reserve_workspace(Plan& p) {
    size_t bytes = 0;
    NMKIT_LT_TRY(cusparseLtMatmulGetWorkspace(&handle, &p.plan, &bytes));
    if (bytes > p.workspace_bytes) {
      if (p.workspace != nullptr) cudaFree(p.workspace);
      p.workspace = nullptr;
      p.workspace_bytes = 0;
      NMKIT_CUDA_TRY(cudaMalloc(&p.workspace, bytes));
      p.workspace_bytes = bytes;
    }
    return ok_status();
  }

  // The workspace of the plan's final algorithm, and its description.
  Status finish_plan(Plan& p, const char* how) {
    NMKIT_TRY(reserve_workspace(p));
    int id = -1, max_id = -1, split_k = -1, split_mode = -1;
    lt->cusparseLtMatmulAlgGetAttribute(&handle, &p.selection, CUSPARSELT_MATMUL_ALG_CONFIG_ID, &id, sizeof(id));
    lt->cusparseLtMatmulAlgGetAttribute(&handle, &p.selection, CUSPARSELT_MATMUL_ALG_CONFIG_MAX_ID, &max_id,
                                        sizeof(max_id));
    lt->cusparseLtMatmulAlgGetAttribute(&handle, &p.selection, CUSPARSELT_MATMUL_SPLIT_K, &split_k, sizeof(split_k));
    lt->cusparseLtMatmulAlgGetAttribute(&handle, &p.selection, CUSPARSELT_MATMUL_SPLIT_K_MODE, &split_mode,
                                        sizeof(split_mode));
    p.description = "cuSPARSELt alg " + std::to_string(id) + " of 0.." + std::to_string(max_id) + ", split-K " +
                    std::to_string(split_k) + " mode " + std::to_string(split_mode) + ", workspace " +
                    std::to_string(p.workspace_bytes >> 10) + " KiB (" + how + ")";
    return ok_status();
  }

  ~State() {
    plans.clear();
    if (compressed != nullptr) cudaFree(compressed);
    if (handle_ready) lt->cusparseLtDestroy(&handle);
  }
};

Result<std::string> CusparseLtGemm::load() {
  auto lt = cusparselt_api();
  if (!lt.ok()) return lt.error();
  return (*lt)->path;
}

Result<std::unique_ptr<CusparseLtGemm>> CusparseLtGemm::make(const void* dense_w, int64_t rows, int64_t K, bool e4m3,
                                                             bool search, cudaStream_t stream) {
  auto loaded = cusparselt_api();
  if (!loaded.ok()) return loaded.error();
  const CusparseLtApi* lt = *loaded;
  std::unique_ptr<CusparseLtGemm> gemm(new CusparseLtGemm());
  gemm->state_ = std::make_unique<State>();
  State& s = *gemm->state_;
  s.lt = lt;
  s.rows = rows;
  s.K = K;
  s.e4m3 = e4m3;
  s.search = search;
  NMKIT_LT_TRY(cusparseLtInit(&s.handle));
  s.handle_ready = true;
  // The compressed size and the compression take a plan; the buffer depends on A's descriptor
  // only, so any token count (32) gives it.
  State::Plan plan;
  NMKIT_TRY(s.init_plan(32, plan));
  size_t compressed_bytes = 0, buffer_bytes = 0;
  NMKIT_LT_TRY(cusparseLtSpMMACompressedSize(&s.handle, &plan.plan, &compressed_bytes, &buffer_bytes));
  // Zeroed slack past the compressed weight: cuSPARSELt 0.8.0's sm_90 kernels read a whole tile's
  // metadata, past the buffer when the rows fill less than a tile (docs/design.md 14).
  NMKIT_CUDA_TRY(cudaMalloc(&s.compressed, compressed_bytes + kCompressedSlack));
  NMKIT_CUDA_TRY(cudaMemset(static_cast<char*>(s.compressed) + compressed_bytes, 0, kCompressedSlack));
  void* buffer = nullptr;
  if (buffer_bytes > 0) NMKIT_CUDA_TRY(cudaMalloc(&buffer, buffer_bytes));
  const cusparseStatus_t status = lt->cusparseLtSpMMACompress(&s.handle, &plan.plan, dense_w, s.compressed, buffer,
                                                              stream);
  cudaStreamSynchronize(stream);
  if (buffer != nullptr) cudaFree(buffer);
  NMKIT_TRY(sparselt_status(*lt, status, "cusparseLtSpMMACompress"));
  return gemm;
}

CusparseLtGemm::~CusparseLtGemm() = default;

Status CusparseLtGemm::run(int64_t tokens, const void* x, void* acc, cudaStream_t stream) {
  State& s = *state_;
  const CusparseLtApi* lt = s.lt;
  const float alpha = 1.0f, beta = 0.0f;  // the scales follow in epilogue.cu
  auto& plan = s.plans[tokens];
  if (plan == nullptr) {
    auto p = std::make_unique<State::Plan>();
    NMKIT_TRY(s.init_plan(tokens, *p));
    if (s.search) {
      // Times every algorithm and split-K setting on this call's buffers (it writes acc, which
      // the call below writes again) and leaves the fastest in the plan and its selection; the
      // workspace is asked for again afterwards. The plan is not made again from the selection:
      // cuSPARSELt 0.8.0 crashed in cusparseLtMatmulPlanInit after a search (docs/design.md 14).
      // The default algorithm's workspace is there for the search's candidates.
      NMKIT_TRY(s.reserve_workspace(*p));
      NMKIT_LT_TRY(cusparseLtMatmulSearch(&s.handle, &p->plan, &alpha, s.compressed, x, &beta, acc, acc,
                                          p->workspace, &stream, 1));
    }
    NMKIT_TRY(s.finish_plan(*p, s.search ? "searched" : "default"));
    plan = std::move(p);
  }
  NMKIT_LT_TRY(cusparseLtMatmul(&s.handle, &plan->plan, &alpha, s.compressed, x, &beta, acc, acc, plan->workspace,
                                &stream, 1));
  return ok_status();
}

std::string CusparseLtGemm::describe(int64_t tokens) const {
  auto it = state_->plans.find(tokens);
  return it == state_->plans.end() || it->second == nullptr ? std::string() : it->second->description;
}

}  // namespace nmkit::cuda
