// The quantize + lift kernel: one block per token row, its threads striding over the row twice
// (the maximum of |x|, then 4-byte words of codes; the second pass reads the row from L1/L2).
// The arithmetic is quant_lift_rows.h's, shared with the host test.
#include "cuda/quant_lift.h"

namespace nmkit::cuda {
namespace {

constexpr int kThreads = 256;

template <class Src>
__global__ void __launch_bounds__(kThreads) quant_lift_kernel(const Src* x, int64_t x_stride, LiftRows shape,
                                                               uint8_t* codes, int64_t codes_stride,
                                                               float* scales, int64_t* bad_row) {
  const int64_t m = blockIdx.x;
  const Src* row = x + m * x_stride;
  uint32_t bits = lane_abs_bits_max(row, shape.K, static_cast<int>(threadIdx.x), kThreads);
  bits = __reduce_max_sync(0xFFFFFFFFu, bits);
  __shared__ uint32_t warp_max[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = bits;
  __syncthreads();
  bits = 0;
  for (int w = 0; w < kThreads / 32; ++w) bits = warp_max[w] > bits ? warp_max[w] : bits;
  if (bits >= 0x7F800000u) {  // an infinity or NaN in the row (the same answer in every thread)
    if (threadIdx.x == 0) atomicMin(reinterpret_cast<unsigned long long*>(bad_row), static_cast<unsigned long long>(m));
    return;
  }
  const quant_rules::RowScale scale = quant_rules::row_scale(quant_rules::float_of(bits), shape.e4m3 ? 448.0f : 127.0f);
  if (threadIdx.x == 0) scales[m] = scale.scale;
  auto* dst = reinterpret_cast<uint32_t*>(codes + m * codes_stride);
  for (int64_t t = threadIdx.x; t < shape.cols / 4; t += kThreads) dst[t] = code_word(row, shape, scale, t);
}

}  // namespace

cudaError_t quantize_lift(const void* x, bool bf16, int64_t M, int64_t x_stride, const LiftRows& shape,
                          uint8_t* codes, int64_t codes_stride, float* scales, int64_t* bad_row,
                          cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(M));
  if (bf16) {
    quant_lift_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const uint16_t*>(x), x_stride, shape, codes,
                                                     codes_stride, scales, bad_row);
  } else {
    quant_lift_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const float*>(x), x_stride, shape, codes,
                                                     codes_stride, scales, bad_row);
  }
  return cudaGetLastError();
}

}  // namespace nmkit::cuda
