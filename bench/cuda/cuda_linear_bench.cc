// GPU timings of scripts/gpu_check.sh (issue 27; the shape of SlideSparse's kernel tables): one
// quantized linear layer call (quantize + lift, GEMM, scales) of CudaSparseLinear for N = K = 4096
// and 8192 and M = 16 ... 8192 tokens, cuBLASLt dense against CUTLASS and cuSPARSELt on 2:4 and on
// slid 6:8 weights, INT8 and E4M3; then the quantize + lift kernel against plain quantization at
// M = K = 4096. Medians of 10 calls after 3 warm-ups, on random data; a call includes its
// synchronization (CudaSparseLinear::apply_device returns when Y is written), the same for all.
// Measured, never asserted: the figures go to the closing note.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cuda/quant_lift.h"
#include "nmkit/cuda_linear.h"
#include "nmkit/prune.h"
#include "nmkit/slide.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class Call>
double time_ms(Call&& call, int warmup = 3, int reps = 10) {
  for (int i = 0; i < warmup; ++i) {
    if (!call()) return -1;
  }
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!call()) return -1;
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(ms);
}

struct Variant {
  std::string name;
  std::optional<CudaSparseLinear> layer;
};

void add(std::vector<Variant>& out, const std::string& name, Result<CudaSparseLinear> layer) {
  if (!layer.ok()) {
    std::printf("  %-28s unavailable: %s\n", name.c_str(), layer.error().message().c_str());
    return;
  }
  out.push_back({name + " (" + layer->kernel_name() + ")", std::move(*layer)});
}

int run() {
  if (cuda_device_count() == 0) {
    std::printf("SKIP: no CUDA device of sm_80 or later\n");
    return 0;
  }
  const std::vector<int64_t> tokens{16, 64, 256, 1024, 2048, 4096, 8192};
  for (const int64_t NK : {int64_t{4096}, int64_t{8192}}) {
    const Tensor w = test::random_tensor(DType::F32, {NK, NK}, 1);
    auto w24 = prune(w.view(), {2, 4}, PruneMethod::Magnitude);
    auto w68 = prune(w.view(), {6, 8}, PruneMethod::Magnitude);
    if (!w24.ok() || !w68.ok()) return 1;
    auto s24 = compress_sparse24(w24->pruned.view());
    auto slid = slide(w68->pruned.view(), Pattern{6, 8});
    if (!s24.ok() || !slid.ok()) return 1;
    for (const QuantType type : {QuantType::Int8, QuantType::E4M3}) {
      std::printf("\nN = K = %lld, %s: ms per layer call (median of 10), speedup = dense / variant\n",
                  static_cast<long long>(NK), std::string(quant_type_name(type)).c_str());
      std::vector<Variant> v;
      add(v, "dense", CudaSparseLinear::dense(w.view(), {type}));
      for (const CudaBackend b : {CudaBackend::Cutlass, CudaBackend::CusparseLt}) {
        add(v, "2:4", CudaSparseLinear::sparse24(*s24, {type, b}));
        add(v, "slid 6:8", CudaSparseLinear::slid(slid->weight.view(), slid->geometry, {type, b}));
      }
      if (v.empty() || v[0].name.rfind("dense", 0) != 0) continue;
      const Tensor x = test::random_tensor(DType::F32, {tokens.back(), NK}, 2, -3.0f, 3.0f);
      void* dx = nullptr;
      void* dy = nullptr;
      if (cudaMalloc(&dx, x.nbytes()) != cudaSuccess || cudaMalloc(&dy, static_cast<size_t>(tokens.back() * NK) * 4) != cudaSuccess) return 1;
      cudaMemcpy(dx, x.data(), x.nbytes(), cudaMemcpyHostToDevice);
      std::printf("%6s", "M");
      for (const Variant& variant : v) std::printf(" | %s", variant.name.c_str());
      std::printf("\n");
      for (const int64_t M : tokens) {
        std::vector<double> ms;
        for (const Variant& variant : v) {
          ms.push_back(time_ms([&] {
            const Status s = variant.layer->apply_device(dx, DType::F32, M, static_cast<float*>(dy));
            if (!s.ok()) std::printf("  %s: %s\n", variant.name.c_str(), s.error().message().c_str());
            return s.ok();
          }));
        }
        std::printf("%6lld", static_cast<long long>(M));
        for (const double t : ms) std::printf(" | %8.4f ms %5.2fx", t, t > 0 ? ms[0] / t : 0.0);
        std::printf("\n");
      }
      cudaFree(dx);
      cudaFree(dy);
    }
  }

  // Fused quantize + lift (6:8 -> K' = 1.5 K codes) against plain quantization, M = K = 4096.
  const int64_t M = 4096, K = 4096;
  auto geometry = SlideGeometry::make({6, 8}, K);
  const Tensor x = test::random_tensor(DType::F32, {M, K}, 3);
  void *dx = nullptr, *codes = nullptr, *scales = nullptr, *bad = nullptr;
  const int64_t cols = (geometry->K_prime() + 63) / 64 * 64;
  cudaMalloc(&dx, x.nbytes());
  cudaMalloc(&codes, static_cast<size_t>(M * cols));
  cudaMalloc(&scales, static_cast<size_t>(M) * 4);
  cudaMalloc(&bad, 8);
  cudaMemcpy(dx, x.data(), x.nbytes(), cudaMemcpyHostToDevice);
  cudaMemcpy(bad, &M, 8, cudaMemcpyHostToDevice);
  cuda::LiftRows plain{K, K, K, 4, 4, false};
  cuda::LiftRows lift{K, cols, geometry->K_prime_raw(), 8, 12, false};
  auto kernel_ms = [&](const cuda::LiftRows& shape) {
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    std::vector<double> ms;
    for (int i = 0; i < 23; ++i) {
      cudaEventRecord(start);
      cuda::quantize_lift(dx, false, M, K, shape, static_cast<uint8_t*>(codes), shape.cols, static_cast<float*>(scales),
                          static_cast<int64_t*>(bad), nullptr);
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float t = 0;
      cudaEventElapsedTime(&t, start, stop);
      if (i >= 3) ms.push_back(t);
    }
    return median(ms);
  };
  const double plain_ms = kernel_ms(plain), lift_ms = kernel_ms(lift);
  std::printf("\nquantize INT8 M = K = 4096: plain %.4f ms, fused + lift 6:8 (K' = %lld) %.4f ms: %.2fx plain\n", plain_ms,
              static_cast<long long>(geometry->K_prime()), lift_ms, lift_ms / plain_ms);
  std::printf("  (bytes: plain %.1f MB, lift %.1f MB; %s)\n", (M * K * 4 + M * K) / 1e6, (M * K * 4 + M * cols) / 1e6,
              cudaGetErrorString(cudaGetLastError()));
  return 0;
}

}  // namespace
}  // namespace nmkit

int main() { return nmkit::run(); }
