// The inside of CudaSparseLinear (include/nmkit/cuda_linear.h): the weight on the device, the
// backend's GEMM and the stages of a call, each on one stream. apply_device runs them in order;
// the GPU benchmark (bench/cuda) times them one by one.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cuda/cuda_plan.h"
#include "cuda/device_layout.h"
#include "cuda/library_gemm.h"
#include "cuda/quant_lift_rows.h"
#include "nmkit/cuda_linear.h"
#include "nmkit/slide_geometry.h"

namespace nmkit::cuda {

// Device memory that frees itself and grows on demand.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  Status reserve(size_t n);
  Status upload(const void* src, size_t n);
  template <class T>
  T* as() const { return static_cast<T*>(ptr); }
};

struct CudaLayer {
  WeightFormat format = WeightFormat::Dense;
  QuantType type = QuantType::Int8;
  CudaBackend backend = CudaBackend::Auto;
  bool search = true;
  int device = 0, sm = 0, sms = 0;  // compute capability (10 * major + minor), multiprocessors
  int64_t rows = 0, K = 0, K_x = 0;
  std::optional<SlideGeometry> geometry;
  LiftRows lift;
  std::vector<SparseTile> tiles;  // CUTLASS INT8 tiles built in (sparse_gemm.h)
  DeviceBuffer values, meta, dense_codes, scale_w, bias;
  std::unique_ptr<CublasLtGemm> cublas;
  std::unique_ptr<CusparseLtGemm> cusparselt;
  // Per-call scratch (X codes, token scales, the first bad row, accumulators) and the pinned word
  // the bad row is read back into, shared by calls under `scratch`: one call at a time.
  mutable std::mutex scratch;
  mutable DeviceBuffer codes, scale_x, bad_row, acc;
  int64_t* bad_row_host = nullptr;

  CudaLayer() = default;
  CudaLayer(const CudaLayer&) = delete;
  CudaLayer& operator=(const CudaLayer&) = delete;
  ~CudaLayer();

  std::string name() const;  // kernel_name()
  GemmGeometry gemm_geometry(int64_t M) const { return cuda::gemm_geometry(backend, rows, K_x, M); }
  SparseTile tile_for(int64_t M) const;
  std::string gemm_name(int64_t M) const;

  // The stages of a call of M >= 1 tokens; the caller holds `scratch` and has reserved M.
  Status reserve(int64_t M) const;
  // X [M, K] (f32 or bf16) into codes and token scales; a non-finite row is recorded on the device.
  Status quantize(const void* x, DType x_dtype, int64_t M, cudaStream_t stream) const;
  // The accumulators of the codes. tile: CUTLASS only, the plan's choice by default.
  Status gemm(int64_t M, cudaStream_t stream, std::optional<SparseTile> tile = std::nullopt) const;
  Status epilogue(int64_t M, float* y, cudaStream_t stream) const;
  // After the stages: waits for the stream; the first non-finite row of X, or M when there is none.
  Result<int64_t> first_bad_row(int64_t M, cudaStream_t stream) const;
};

}  // namespace nmkit::cuda
