// CudaSparseLinear's choices (include/nmkit/cuda_linear.h): the backend of a weight and the CUTLASS
// tile of a call, the GPU's counterpart of src/linear/linear_plan.cc, kept here until the one plan
// takes them. Host code only, tested in CI (tests/cuda/cuda_linear_test.cc, CudaPlan).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/sparse_tile.h"
#include "nmkit/cuda_linear.h"
#include "nmkit/status.h"
#include "nmkit/weight_format.h"

namespace nmkit::cuda {

// sm: compute capability as 10 * major + minor. cusparselt_loads: CusparseLtGemm::load() succeeded.
// An Error when the requested backend cannot run the weight on this GPU (E4M3 before sm_89, a
// sparse backend for a dense weight, cuSPARSELt that does not load).
Result<CudaBackend> choose_backend(WeightFormat format, QuantType type, CudaBackend requested, int sm,
                                   bool cusparselt_loads);

// The tile a GEMM of [rows, tokens] (tokens as run, a multiple of 16) takes among `built`: the
// largest tile whose grid still gives each of the `sms` multiprocessors a tile and whose padding
// computes at most 1/8 more than 128x128's, preferring more rows per tile at equal area (W is the
// compressed operand: fewer bytes per MMA); else 128x128. Until scripts/gpu_check.sh has measured
// the tiles against each other on an H100, this is the standard wave argument, not a measurement.
SparseTile choose_sparse_tile(int64_t rows, int64_t tokens, int sms, const std::vector<SparseTile>& built);

}  // namespace nmkit::cuda
