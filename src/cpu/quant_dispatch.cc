#include "cpu/kernel_table.h"

namespace nmkit::cpu {

void fill_quant_kernels(IsaTier, QuantKernels&) {}

}  // namespace nmkit::cpu
