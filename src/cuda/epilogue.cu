// The scale epilogue (epilogue.h). Tokens-major accumulators: one thread per element, consecutive
// threads along a row of Y (coalesced reads of acc and writes of y). Rows-major ones (CUTLASS):
// 32 x 32 tiles through shared memory, read along tokens and written along rows, so both sides
// stay coalesced. Compiled with -fmad=false (src/cuda/CMakeLists.txt): the multiply and the bias
// add are two roundings, as on the CPU.
#include "cuda/epilogue.h"

namespace nmkit::cuda {
namespace {

template <class Acc>
__global__ void scale_tokens_major(const Acc* acc, AccLayout layout, int64_t tokens, int64_t rows,
                                   const float* scale_x, const float* scale_w, const float* bias, float* y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * rows) return;
  const int64_t t = i / rows, r = i % rows;
  y[i] = scaled_output(static_cast<float>(acc[acc_offset(layout, t, r)]), scale_x[t], scale_w[r], bias, r);
}

constexpr int kTile = 32, kTileRowsPerPass = 8;  // a 32 x 8 block walks a 32 x 32 tile in 4 passes

template <class Acc>
__global__ void __launch_bounds__(kTile * kTileRowsPerPass)
    scale_rows_major(const Acc* acc, AccLayout layout, int64_t tokens, int64_t rows, const float* scale_x,
                     const float* scale_w, const float* bias, float* y) {
  __shared__ float tile[kTile][kTile + 1];  // +1: the column reads hit 32 different banks
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kTile, r0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int i = threadIdx.y; i < kTile; i += kTileRowsPerPass) {  // acc row r0 + i, tokens along x
    const int64_t t = t0 + threadIdx.x, r = r0 + i;
    if (t < tokens && r < rows) tile[i][threadIdx.x] = static_cast<float>(acc[acc_offset(layout, t, r)]);
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kTile; j += kTileRowsPerPass) {  // y row t0 + j, rows along x
    const int64_t t = t0 + j, r = r0 + threadIdx.x;
    if (t < tokens && r < rows) y[t * rows + r] = scaled_output(tile[threadIdx.x][j], scale_x[t], scale_w[r], bias, r);
  }
}

template <class Acc>
cudaError_t launch(const Acc* acc, const AccLayout& layout, int64_t tokens, int64_t rows, const float* scale_x,
                   const float* scale_w, const float* bias, float* y, cudaStream_t stream) {
  if (layout.rows_major) {
    const dim3 grid(static_cast<unsigned>((tokens + kTile - 1) / kTile),
                    static_cast<unsigned>((rows + kTile - 1) / kTile));
    scale_rows_major<<<grid, dim3(kTile, kTileRowsPerPass), 0, stream>>>(acc, layout, tokens, rows, scale_x, scale_w,
                                                                         bias, y);
  } else {
    const int threads = 256;
    const auto blocks = static_cast<unsigned>((tokens * rows + threads - 1) / threads);
    scale_tokens_major<<<blocks, threads, 0, stream>>>(acc, layout, tokens, rows, scale_x, scale_w, bias, y);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t scale_epilogue(const void* acc, bool int_acc, const AccLayout& layout, int64_t tokens, int64_t rows,
                           const float* scale_x, const float* scale_w, const float* bias, float* y,
                           cudaStream_t stream) {
  if (tokens * rows == 0) return cudaSuccess;
  if (int_acc) return launch(static_cast<const int32_t*>(acc), layout, tokens, rows, scale_x, scale_w, bias, y, stream);
  return launch(static_cast<const float*>(acc), layout, tokens, rows, scale_x, scale_w, bias, y, stream);
}

}  // namespace nmkit::cuda
