// The GEMMs nmkit runs through NVIDIA's libraries, to the accumulators (epilogue.h applies the
// scales): cuBLASLt dense (the dense form of CudaSparseLinear and the baseline of the benchmarks)
// and cuSPARSELt 2:4 (a second sparse backend beside CUTLASS). Both compute
//   acc[tokens, rows] = X codes [tokens, K] x W codes [rows, K]^T
// as the column-major product W x X^T (A row-major, B column-major: the "TN" layout that 8-bit
// tensor-core GEMMs take), acc int32 for INT8 and f32 for E4M3, ld = rows.
//
// Algorithms: each object keeps one plan per token count, made on that count's first call. With
// `search` the first call also times the library's candidates on the call's own buffers and keeps
// the fastest (cuBLASLt: up to 8 of its heuristic's algorithms; cuSPARSELt: cusparseLtMatmulSearch),
// so a tuned sparse GEMM is compared with a tuned dense one; describe() names the pick.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "nmkit/status.h"

namespace nmkit::cuda {

struct LibraryGemmShape {
  int64_t rows = 0;  // cuSPARSELt: a multiple of 32 (device_layout.h)
  int64_t tokens = 0;
  int64_t K = 0;  // a multiple of 128 (device_layout.h pads every backend alike)
  bool e4m3 = false;
};

class CublasLtGemm {
 public:
  static Result<std::unique_ptr<CublasLtGemm>> make(bool search);
  ~CublasLtGemm();
  Status run(const LibraryGemmShape& shape, const void* w, const void* x, void* acc, cudaStream_t stream);
  // The algorithm a plan runs ("cuBLASLt algo 21 tile 18 split-K 1, 1st of 8 timed"); empty before its first run.
  std::string describe(const LibraryGemmShape& shape) const;

 private:
  CublasLtGemm() = default;
  struct State;
  std::unique_ptr<State> state_;
};

// cuSPARSELt, loaded at run time (dlopen of libcusparseLt.so.0: NMKIT_CUSPARSELT names the file,
// else the loader's search path, else the copy that scripts/setup_cuda.sh unpacked). The weight is
// compressed on the device by cusparseLtSpMMACompress from its dense 2:4 codes (the buffer is
// opaque, docs/design.md 7).
class CusparseLtGemm {
 public:
  // The library's path and whether every entry point nmkit calls resolved (no GPU needed).
  static Result<std::string> load();
  // dense_w: [rows, K] 2:4 codes on the device, rows and K multiples of 32.
  static Result<std::unique_ptr<CusparseLtGemm>> make(const void* dense_w, int64_t rows, int64_t K, bool e4m3,
                                                      bool search, cudaStream_t stream);
  ~CusparseLtGemm();
  // tokens: a multiple of 32.
  Status run(int64_t tokens, const void* x, void* acc, cudaStream_t stream);
  // "cuSPARSELt alg 3 of 0..11, split-K 1 (searched)"; empty before the first run of `tokens`.
  std::string describe(int64_t tokens) const;

 private:
  CusparseLtGemm() = default;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace nmkit::cuda
