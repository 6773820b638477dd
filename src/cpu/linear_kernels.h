// Slots of the sparse/dense linear kernels (filled per tier by src/cpu/linear_dispatch.cc).
#pragma once

namespace nmkit::cpu {

struct LinearKernels {};

}  // namespace nmkit::cpu
