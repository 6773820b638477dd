#include "cpu/kernel_table.h"

namespace nmkit::cpu {

void fill_linear_kernels(IsaTier, LinearKernels&) {}

}  // namespace nmkit::cpu
