// The quantize + lift kernel: one block per token row, its threads striding over the row twice
// (the maximum of |x|, then the codes; the second pass reads the row from L1/L2). Where the row is
// 16-byte aligned both passes read 16-byte vectors, and the second works by groups of inputs
// (quant_lift_rows.h's group path) where the pattern has one, by 4-byte words of codes elsewhere.
// The arithmetic is quant_lift_rows.h's, shared with the host test.
#include <cstring>

#include "cuda/quant_lift.h"

namespace nmkit::cuda {
namespace {

constexpr int kThreads = 256;

// This thread's largest |x| bits over the row: 16-byte vectors when `aligned`, then the tail.
template <bool aligned, class Src>
__device__ uint32_t thread_abs_bits_max(const Src* row, int64_t K) {
  constexpr int kPerVector = 16 / sizeof(Src);
  uint32_t max = 0;
  int64_t tail = 0;
  if constexpr (aligned) {
    const int vectors = static_cast<int>(K / kPerVector);
    for (int c = threadIdx.x; c < vectors; c += kThreads) {
      const uint4 raw = __ldg(reinterpret_cast<const uint4*>(row) + c);
      Src v[kPerVector];
      memcpy(v, &raw, 16);
#pragma unroll
      for (int l = 0; l < kPerVector; ++l) max = abs_f32_bits(v[l]) > max ? abs_f32_bits(v[l]) : max;
    }
    tail = vectors * kPerVector;
  }
  return lane_abs_bits_max(row, tail, K, static_cast<int>(threadIdx.x), kThreads, max);
}

// kIn inputs from a 16-byte aligned row (kIn * sizeof(Src) is 8 bytes or a multiple of 16).
template <int kIn, class Src>
__device__ void load_group(const Src* in, Src (&v)[kIn]) {
  constexpr int kBytes = kIn * static_cast<int>(sizeof(Src));
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int c = 0; c < kBytes / 16; ++c) {
      const uint4 raw = __ldg(reinterpret_cast<const uint4*>(in) + c);
      memcpy(reinterpret_cast<char*>(v) + 16 * c, &raw, 16);
    }
  } else {
    static_assert(kBytes == 8);
    const uint2 raw = __ldg(reinterpret_cast<const uint2*>(in));
    memcpy(v, &raw, 8);
  }
}

// kIn: the group path's group size (rows 16-byte aligned: pass 1 reads vectors too), or 0 for the
// word path with scalar reads (rows not 16-byte aligned, patterns without a group path).
template <int kIn, class Src>
__global__ void __launch_bounds__(kThreads) quant_lift_kernel(const Src* x, int64_t x_stride, LiftRows shape,
                                                               uint8_t* codes, int64_t codes_stride, float* scales,
                                                               int64_t* bad_row) {
  const int64_t m = blockIdx.x;
  const Src* row = x + m * x_stride;
  uint32_t bits = thread_abs_bits_max<(kIn > 0)>(row, shape.K);
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
  int64_t first_word = 0;
  if constexpr (kIn > 0) {
    constexpr int kWords = kIn / 2 - 1;
    const int groups = static_cast<int>(whole_groups<kIn>(shape));  // 32-bit: fewer registers live
    for (int g = threadIdx.x; g < groups; g += kThreads) {
      Src v[kIn];
      load_group<kIn>(row + g * kIn, v);
      uint32_t words[kWords];
      group_words<kIn>(v, shape.e4m3, scale, words);
#pragma unroll
      for (int w = 0; w < kWords; ++w) dst[g * kWords + w] = words[w];
    }
    first_word = groups * kWords;
  }
  for (int64_t t = first_word + threadIdx.x; t < shape.cols / 4; t += kThreads) dst[t] = code_word(row, shape, scale, t);
}

template <class Src>
cudaError_t launch(const Src* x, int64_t M, int64_t x_stride, const LiftRows& shape, uint8_t* codes,
                   int64_t codes_stride, float* scales, int64_t* bad_row, cudaStream_t stream) {
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && x_stride * sizeof(Src) % 16 == 0;
  const dim3 grid(static_cast<unsigned>(M));
  if (aligned && group_path_fits<8>(shape)) {
    quant_lift_kernel<8><<<grid, kThreads, 0, stream>>>(x, x_stride, shape, codes, codes_stride, scales, bad_row);
  } else if (aligned && group_path_fits<4>(shape)) {
    quant_lift_kernel<4><<<grid, kThreads, 0, stream>>>(x, x_stride, shape, codes, codes_stride, scales, bad_row);
  } else {
    quant_lift_kernel<0><<<grid, kThreads, 0, stream>>>(x, x_stride, shape, codes, codes_stride, scales, bad_row);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t quantize_lift(const void* x, bool bf16, int64_t M, int64_t x_stride, const LiftRows& shape,
                          uint8_t* codes, int64_t codes_stride, float* scales, int64_t* bad_row,
                          cudaStream_t stream) {
  if (M <= 0) return cudaSuccess;
  if (bf16) {
    return launch(static_cast<const uint16_t*>(x), M, x_stride, shape, codes, codes_stride, scales, bad_row, stream);
  }
  return launch(static_cast<const float*>(x), M, x_stride, shape, codes, codes_stride, scales, bad_row, stream);
}

}  // namespace nmkit::cuda
