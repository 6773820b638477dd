// CudaSparseLinear's choice of backend (include/nmkit/cuda_linear.h): the GPU's counterpart of
// src/linear/linear_plan.cc, kept here until the one plan takes it.
#pragma once

#include "nmkit/cuda_linear.h"
#include "nmkit/status.h"
#include "nmkit/weight_format.h"

namespace nmkit::cuda {

// sm: compute capability as 10 * major + minor. cusparselt_loads: CusparseLtGemm::load() succeeded.
// An Error when the requested backend cannot run the weight on this GPU (E4M3 before sm_89, a
// sparse backend for a dense weight, cuSPARSELt that does not load).
Result<CudaBackend> choose_backend(WeightFormat format, QuantType type, CudaBackend requested, int sm,
                                   bool cusparselt_loads);

}  // namespace nmkit::cuda
