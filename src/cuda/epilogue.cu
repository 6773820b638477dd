// One thread per output element, consecutive threads along a row of Y (coalesced reads of acc and
// writes of y; the scales come from L1/L2). Compiled with -fmad=false (src/cuda/CMakeLists.txt):
// the multiply and the bias add are two roundings, as on the CPU.
#include "cuda/epilogue.h"

namespace nmkit::cuda {
namespace {

template <class Acc>
__global__ void scale_kernel(const Acc* acc, int64_t tokens, int64_t rows, const float* scale_x,
                             const float* scale_w, const float* bias, float* y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * rows) return;
  const int64_t t = i / rows, r = i % rows;
  float v = static_cast<float>(acc[i]) * (scale_x[t] * scale_w[r]);
  if (bias != nullptr) v = v + bias[r];
  y[i] = v;
}

}  // namespace

cudaError_t scale_epilogue(const void* acc, bool int_acc, int64_t tokens, int64_t rows, const float* scale_x,
                           const float* scale_w, const float* bias, float* y, cudaStream_t stream) {
  const int64_t n = tokens * rows;
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
  if (int_acc) {
    scale_kernel<<<blocks, threads, 0, stream>>>(static_cast<const int32_t*>(acc), tokens, rows, scale_x, scale_w,
                                                 bias, y);
  } else {
    scale_kernel<<<blocks, threads, 0, stream>>>(static_cast<const float*>(acc), tokens, rows, scale_x, scale_w,
                                                 bias, y);
  }
  return cudaGetLastError();
}

}  // namespace nmkit::cuda
