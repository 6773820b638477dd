// CUDA, cuBLASLt and cuSPARSELt failures as nmkit Errors (docs/design.md 10.1: a one-line message
// naming what failed; nothing aborts).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "nmkit/status.h"

namespace nmkit::cuda {

inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return ok_status();
  return Error(ErrorCode::Unsupported, std::string("CUDA: ") + what + ": " + cudaGetErrorName(error) + " (" +
                                           cudaGetErrorString(error) + ")");
}

#define NMKIT_CUDA_TRY(call) NMKIT_TRY(::nmkit::cuda::cuda_status((call), #call))

}  // namespace nmkit::cuda
