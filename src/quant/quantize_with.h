// The public quantization calls on an explicit kernel table, so tests and benchmarks can run every
// ISA tier in one process (the public calls use cpu::kernels(), the active tier).
#pragma once

#include "cpu/quant_kernels.h"
#include "nmkit/quant.h"

namespace nmkit {

// Non-temporal stores of the codes. Auto uses ordinary stores: measured on this project's machine
// (Zen 5 VM, bf16 [4096, 4096] -> int8, operands rotated beyond the L3, best of 30), ordinary stores
// moved 31 GB/s and streaming ones 27 GB/s (fused 6:8: 30 vs 23 GB/s); glibc's memcpy, which
// streams at this size, reached 17-24 GB/s. Always is kept for machines where streaming wins.
enum class StreamStores { Auto, Never, Always };

// quantize_tokens_into on `kernels` (cpu::kernels_for(tier).quant for a given tier).
Status quantize_rows_with(const cpu::QuantKernels& kernels, const TensorView& x, QuantType type,
                          const SlideGeometry* lift, std::byte* codes, int64_t codes_stride,
                          float* scales, std::string_view name,
                          StreamStores stream = StreamStores::Auto);

}  // namespace nmkit
