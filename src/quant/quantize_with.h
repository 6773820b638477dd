// The public quantization calls on an explicit kernel table, so tests and benchmarks can run every
// ISA tier in one process (the public calls use cpu::kernels(), the active tier).
#pragma once

#include "cpu/quant_kernels.h"
#include "nmkit/quant.h"

namespace nmkit {

// quantize_tokens_into on `kernels` (cpu::kernels_for(tier).quant for a given tier).
Status quantize_rows_with(const cpu::QuantKernels& kernels, const TensorView& x, QuantType type,
                          const SlideGeometry* lift, std::byte* codes, int64_t codes_stride,
                          float* scales, std::string_view name);

}  // namespace nmkit
