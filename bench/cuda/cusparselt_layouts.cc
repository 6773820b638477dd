// cuSPARSELt's INT8 2:4 GEMM in the layouts and output types it offers, on this GPU, against the
// configuration CusparseLtGemm runs (A = W row-major, B = X codes column-major, D int32
// column-major: docs/design.md 14) and against cuBLASLt dense INT8: whether another configuration
// of the library gets the 2:4 GEMM nearer its 2x (scripts/gpu_check.sh, step 3). Every variant
// gets the library's algorithm search, runs on the same codes, and is checked against the first:
// int32 outputs exactly, bf16 outputs to bf16's rounding. GEMM only, median of 15 calls with L2
// evicted before each. Measured, never asserted.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda/gpu_timing.h"
#include "cuda/cuda_status.h"
#include "cuda/cusparselt_api.h"
#include "cuda/library_gemm.h"

namespace nmkit::cuda {
namespace {

using bench_cuda::L2Flush;
using bench_cuda::median;

struct Config {
  const char* name;
  cusparseOrder_t a_order, d_order;
  cudaDataType d_type;
};
const Config kConfigs[] = {
    {"A row, D col int32 (nmkit)", CUSPARSE_ORDER_ROW, CUSPARSE_ORDER_COL, CUDA_R_32I},
    {"A row, D row int32", CUSPARSE_ORDER_ROW, CUSPARSE_ORDER_ROW, CUDA_R_32I},
    {"A col, D col int32", CUSPARSE_ORDER_COL, CUSPARSE_ORDER_COL, CUDA_R_32I},
    {"A row, D col bf16", CUSPARSE_ORDER_ROW, CUSPARSE_ORDER_COL, CUDA_R_16BF},
    {"A row, D row bf16", CUSPARSE_ORDER_ROW, CUSPARSE_ORDER_ROW, CUDA_R_16BF},
};

template <class Call>
double time_calls(Call call, const L2Flush& flush) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i) call();
  std::vector<float> ms;
  for (int i = 0; i < 15; ++i) {
    flush.run(nullptr);
    cudaEventRecord(start);
    const bool ok = call();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    if (ok) ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return cudaGetLastError() == cudaSuccess ? median(ms) : -1;
}

// One configuration: D (host, as float in [token][row] order) and the median ms; an error if the
// library refuses it.
Result<double> run_config(const Config& c, int64_t rows, int64_t K, int64_t M, const std::vector<int8_t>& w_rows,
                          const void* dx, const L2Flush& flush, std::vector<float>& d_out) {
  auto loaded = cusparselt_api();
  if (!loaded.ok()) return loaded.error();
  const CusparseLtApi* lt = *loaded;
  // The weight in the configuration's order.
  std::vector<int8_t> w(w_rows.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      w[c.a_order == CUSPARSE_ORDER_ROW ? r * K + k : k * rows + r] = w_rows[r * K + k];
    }
  }
  const int64_t ld_a = c.a_order == CUSPARSE_ORDER_ROW ? K : rows;
  const int64_t ld_d = c.d_order == CUSPARSE_ORDER_COL ? rows : M;
  const size_t d_bytes = static_cast<size_t>(rows * M) * (c.d_type == CUDA_R_32I ? 4 : 2);
  cusparseLtHandle_t handle;
  NMKIT_LT_TRY(cusparseLtInit(&handle));
  cusparseLtMatDescriptor_t a, b, d;
  cusparseLtMatmulDescriptor_t matmul;
  cusparseLtMatmulAlgSelection_t selection;
  cusparseLtMatmulPlan_t plan;
  int ready = 0;  // descriptors a, b, d, the selection and the plan made so far, in that order
  void *dw = nullptr, *compressed = nullptr, *buffer = nullptr, *dd = nullptr, *workspace = nullptr;
  double ms = -1;
  Status status = [&]() -> Status {
    NMKIT_LT_TRY(cusparseLtStructuredDescriptorInit(&handle, &a, rows, K, ld_a, 16, CUDA_R_8I, c.a_order,
                                                    CUSPARSELT_SPARSITY_50_PERCENT));
    ready = 1;
    NMKIT_LT_TRY(cusparseLtDenseDescriptorInit(&handle, &b, K, M, K, 16, CUDA_R_8I, CUSPARSE_ORDER_COL));
    ready = 2;
    NMKIT_LT_TRY(cusparseLtDenseDescriptorInit(&handle, &d, rows, M, ld_d, 16, c.d_type, c.d_order));
    ready = 3;
    NMKIT_LT_TRY(cusparseLtMatmulDescriptorInit(&handle, &matmul, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                CUSPARSE_OPERATION_NON_TRANSPOSE, &a, &b, &d, &d,
                                                CUSPARSE_COMPUTE_32I));
    NMKIT_LT_TRY(cusparseLtMatmulAlgSelectionInit(&handle, &selection, &matmul, CUSPARSELT_MATMUL_ALG_DEFAULT));
    ready = 4;
    NMKIT_LT_TRY(cusparseLtMatmulPlanInit(&handle, &plan, &matmul, &selection));
    ready = 5;
    size_t compressed_bytes = 0, buffer_bytes = 0, workspace_bytes = 0;
    NMKIT_LT_TRY(cusparseLtSpMMACompressedSize(&handle, &plan, &compressed_bytes, &buffer_bytes));
    NMKIT_CUDA_TRY(cudaMalloc(&dw, w.size()));
    NMKIT_CUDA_TRY(cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice));
    NMKIT_CUDA_TRY(cudaMalloc(&compressed, compressed_bytes + (size_t{256} << 10)));
    NMKIT_CUDA_TRY(cudaMemset(compressed, 0, compressed_bytes + (size_t{256} << 10)));
    if (buffer_bytes > 0) NMKIT_CUDA_TRY(cudaMalloc(&buffer, buffer_bytes));
    NMKIT_LT_TRY(cusparseLtSpMMACompress(&handle, &plan, dw, compressed, buffer, nullptr));
    NMKIT_CUDA_TRY(cudaMalloc(&dd, d_bytes));
    NMKIT_LT_TRY(cusparseLtMatmulGetWorkspace(&handle, &plan, &workspace_bytes));
    const size_t workspace_max = size_t{64} << 20;  // the search's candidates, split-K included
    NMKIT_CUDA_TRY(cudaMalloc(&workspace, std::max(workspace_bytes, workspace_max)));
    const float alpha = 1.0f, beta = 0.0f;
    cudaStream_t stream = nullptr;
    NMKIT_LT_TRY(cusparseLtMatmulSearch(&handle, &plan, &alpha, compressed, dx, &beta, dd, dd, workspace, &stream, 1));
    NMKIT_LT_TRY(cusparseLtMatmulGetWorkspace(&handle, &plan, &workspace_bytes));
    if (workspace_bytes > workspace_max) return Error("workspace over 64 MiB");
    ms = time_calls(
        [&] {
          return lt->cusparseLtMatmul(&handle, &plan, &alpha, compressed, dx, &beta, dd, dd, workspace, &stream, 1) ==
                 CUSPARSE_STATUS_SUCCESS;
        },
        flush);
    // D as float, [token][row].
    std::vector<uint8_t> host(d_bytes);
    NMKIT_CUDA_TRY(cudaMemcpy(host.data(), dd, d_bytes, cudaMemcpyDeviceToHost));
    d_out.assign(static_cast<size_t>(rows * M), 0.0f);
    for (int64_t t = 0; t < M; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t at = c.d_order == CUSPARSE_ORDER_COL ? t * rows + r : r * M + t;
        float v;
        if (c.d_type == CUDA_R_32I) {
          int32_t i;
          std::memcpy(&i, host.data() + 4 * at, 4);
          v = static_cast<float>(i);
        } else {
          uint16_t h;
          std::memcpy(&h, host.data() + 2 * at, 2);
          const uint32_t bits = static_cast<uint32_t>(h) << 16;
          std::memcpy(&v, &bits, 4);
        }
        d_out[static_cast<size_t>(t * rows + r)] = v;
      }
    }
    return ok_status();
  }();
  cudaFree(dw);
  cudaFree(compressed);
  cudaFree(buffer);
  cudaFree(dd);
  cudaFree(workspace);
  if (ready >= 5) lt->cusparseLtMatmulPlanDestroy(&plan);
  if (ready >= 4) lt->cusparseLtMatmulAlgSelectionDestroy(&selection);
  if (ready >= 3) lt->cusparseLtMatDescriptorDestroy(&d);
  if (ready >= 2) lt->cusparseLtMatDescriptorDestroy(&b);
  if (ready >= 1) lt->cusparseLtMatDescriptorDestroy(&a);
  lt->cusparseLtDestroy(&handle);
  if (!status.ok()) return status.error();
  return ms;
}

void run_shape(int64_t NK, int64_t M, const L2Flush& flush) {
  const int64_t rows = NK, K = NK;
  std::mt19937 rng(static_cast<uint32_t>(NK + M));
  std::uniform_int_distribution<int> value(-127, 127), pair(0, 5);
  static const int kKept[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
  std::vector<int8_t> w(static_cast<size_t>(rows * K), 0), x(static_cast<size_t>(M * K)), dense_w(w.size());
  for (int64_t g = 0; g < rows * K / 4; ++g) {
    const int p = pair(rng);
    for (const int k : kKept[p]) w[static_cast<size_t>(4 * g + k)] = static_cast<int8_t>(value(rng));
  }
  for (int8_t& v : x) v = static_cast<int8_t>(value(rng));
  for (int8_t& v : dense_w) v = static_cast<int8_t>(value(rng));  // the baseline on dense data
  void *dx = nullptr, *dw = nullptr, *acc = nullptr;
  cudaMalloc(&dx, x.size());
  cudaMalloc(&dw, w.size());
  cudaMalloc(&acc, static_cast<size_t>(rows * M) * 4);
  cudaMemcpy(dx, x.data(), x.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dw, dense_w.data(), dense_w.size(), cudaMemcpyHostToDevice);
  double dense_ms = -1;
  if (auto dense = CublasLtGemm::make(true); dense.ok()) {
    const LibraryGemmShape shape{rows, M, K, false};
    dense_ms = time_calls([&] { return (*dense)->run(shape, dw, dx, acc, nullptr).ok(); }, flush);
  }
  std::printf("N = K = %lld, M = %lld: cuBLASLt dense INT8 %.4f ms\n", static_cast<long long>(NK),
              static_cast<long long>(M), dense_ms);
  std::vector<float> first;
  for (const Config& c : kConfigs) {
    std::vector<float> d;
    auto ms = run_config(c, rows, K, M, w, dx, flush, d);
    if (!ms.ok()) {
      std::printf("  %-28s refused: %s\n", c.name, ms.error().message().c_str());
      continue;
    }
    if (first.empty()) first = d;
    int64_t off = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      const float bound = c.d_type == CUDA_R_32I ? 0.0f : std::fabs(first[i]) * 0x1p-8f;
      off += !(std::fabs(d[i] - first[i]) <= bound);
    }
    std::printf("  %-28s %.4f ms  %.2fx dense  %s\n", c.name, *ms, dense_ms > 0 && *ms > 0 ? dense_ms / *ms : 0.0,
                off == 0 ? "agrees with the first" : ("DIFFERS in " + std::to_string(off) + " outputs").c_str());
  }
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(acc);
}

int run() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 0;
  }
  auto lt = cusparselt_api();
  if (!lt.ok()) {
    std::printf("SKIP: %s\n", lt.error().message().c_str());
    return 0;
  }
  const L2Flush flush;
  if (!flush.ok()) return 1;
  std::printf("cuSPARSELt INT8 2:4 configurations (GEMM only, median of 15, L2 evicted before each)\n");
  for (const int64_t NK : {int64_t{4096}, int64_t{8192}}) {
    for (const int64_t M : {int64_t{32}, int64_t{2048}, int64_t{8192}}) run_shape(NK, M, flush);
  }
  return 0;
}

}  // namespace
}  // namespace nmkit::cuda

int main() { return nmkit::cuda::run(); }
