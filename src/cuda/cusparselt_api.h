// cuSPARSELt loaded at run time (docs/design.md 14): the entry points nmkit calls, resolved through
// dlsym into one table typed from the header of the version nmkit builds against (0.10.0), so a
// library that lacks one fails to load with its name rather than at the first call. Shared by
// CusparseLtGemm (library_gemm.h) and the GPU benchmarks.
#pragma once

#include <cusparseLt.h>

#include <string>

#include "nmkit/status.h"

namespace nmkit::cuda {

#define NMKIT_CUSPARSELT_ENTRY_POINTS(X)                                                             \
  X(cusparseLtInit) X(cusparseLtDestroy) X(cusparseLtDenseDescriptorInit)                          \
  X(cusparseLtStructuredDescriptorInit) X(cusparseLtMatDescriptorDestroy)                          \
  X(cusparseLtMatmulDescriptorInit) X(cusparseLtMatmulAlgSelectionInit)                            \
  X(cusparseLtMatmulAlgSelectionDestroy) X(cusparseLtMatmulPlanInit) X(cusparseLtMatmulPlanDestroy) \
  X(cusparseLtMatmulGetWorkspace) X(cusparseLtMatmul) X(cusparseLtSpMMACompressedSize)             \
  X(cusparseLtSpMMACompress) X(cusparseLtGetErrorName) X(cusparseLtMatmulSearch)                  \
  X(cusparseLtMatmulAlgGetAttribute)

struct CusparseLtApi {
#define NMKIT_DECLARE(name) decltype(&::name) name = nullptr;
  NMKIT_CUSPARSELT_ENTRY_POINTS(NMKIT_DECLARE)
#undef NMKIT_DECLARE
  std::string path;
};

// The table: the library NMKIT_CUSPARSELT names, else libcusparseLt.so.0 on the loader's path,
// else the copy scripts/setup_cuda.sh unpacked (loaded once; later calls return the same answer).
Result<const CusparseLtApi*> cusparselt_api();

// OK, or an error naming `what` and the library's name of the status.
Status sparselt_status(const CusparseLtApi& lt, cusparseStatus_t status, const char* what);
#define NMKIT_LT_TRY(call) NMKIT_TRY(sparselt_status(*lt, lt->call, #call))

}  // namespace nmkit::cuda
