// Slots of the quantization kernels (filled per tier by src/cpu/quant_dispatch.cc).
#pragma once

namespace nmkit::cpu {

struct QuantKernels {};

}  // namespace nmkit::cpu
