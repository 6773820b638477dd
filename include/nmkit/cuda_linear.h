// Quantized linear layers on an NVIDIA GPU (docs/design.md section 14), with SparseLinear's contract
// (include/nmkit/linear.h): Y[M, rows] = X[M, K] * W^T (+ bias), W dense, 2:4 or slid. Built by the
// optional nmkit_cuda library (CMake option NMKIT_CUDA); no CUDA type appears here.
//
// Every call quantizes X per token (INT8 or E4M3, docs/design.md 6) in one CUDA kernel that also
// lifts it for a slid weight (section 5), runs an 8-bit GEMM and applies y = acc * (scale_x *
// scale_w) (+ bias) in f32. W is quantized per output row when the layer is built, by the CPU rule,
// so for INT8 Y equals the CPU's SparseLinear with options.int8 (and ref_quant_linear) bit for bit.
// Backends (the choice is CudaSparseLinear's own, src/cuda/cuda_plan.cc), each GEMM to its
// accumulators, then one scale kernel for all:
//   dense    cuBLASLt INT8 / E4M3 GEMM
//   2:4/slid CUTLASS 2.x SparseGemm (mma.sp; INT8 from sm_80, E4M3 on sm_89) or cuSPARSELt
//            (loaded at run time). Auto picks cuSPARSELt on sm_90 where it loads (CUTLASS 2.x
//            runs Ampere's mma.sp there, not Hopper's wgmma), CUTLASS elsewhere.
// Layout on the device (src/cuda/device_layout.h): X codes (M, K_x) with K_x = K (K' when slid)
// rounded up to 128, zeros past K'; CUTLASS: values and metadata as include/nmkit/cutlass_sm80.h;
// cuBLASLt and cuSPARSELt: the dense codes (cuSPARSELt compresses them into its own opaque buffer);
// rows and tokens padded to what each GEMM takes. Shapes: any rows >= 1 and K >= 1.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "nmkit/format.h"
#include "nmkit/quant.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"
#include "nmkit/weight_format.h"

namespace nmkit {

enum class CudaBackend : uint8_t { Auto, Cutlass, CusparseLt, CublasLt };
std::string_view cuda_backend_name(CudaBackend backend);  // "auto", "cutlass", "cusparselt", "cublaslt"
Result<CudaBackend> cuda_backend_from_name(std::string_view name);

struct CudaLinearOptions {
  QuantType type = QuantType::Int8;
  CudaBackend backend = CudaBackend::Auto;  // Auto: see above; dense weights always run cuBLASLt
  int device = 0;
  // cuBLASLt and cuSPARSELt: time the library's algorithms on the first call of each token count
  // and keep the fastest (src/cuda/library_gemm.h); off: the library's default choice.
  bool search = true;
};

// CUDA devices of compute capability 8.0 or more (0 without a GPU or a driver: never an error).
int cuda_device_count();

namespace cuda { struct CudaLayer; }

class CudaSparseLinear {
 public:
  // A dense [rows, K] weight (f32, f16 or bf16).
  static Result<CudaSparseLinear> dense(const TensorView& weight, const CudaLinearOptions& options = {});
  // A 2:4 weight (f32, f16 or bf16 values).
  static Result<CudaSparseLinear> sparse24(const Sparse24& weight, const CudaLinearOptions& options = {});
  // A SlideSparse weight [rows, geometry.K_prime] (2:4-compliant, from a keep:2N weight of width
  // geometry.K); calls take X of width geometry.K and lift it while quantizing.
  static Result<CudaSparseLinear> slid(const TensorView& slid_weight, const SlideGeometry& geometry,
                                       const CudaLinearOptions& options = {});

  CudaSparseLinear(CudaSparseLinear&&) noexcept;
  CudaSparseLinear& operator=(CudaSparseLinear&&) noexcept;
  ~CudaSparseLinear();

  // `rows` values (f32, f16 or bf16) added to every output row.
  Status set_bias(const TensorView& bias);

  // x: device memory [M, K] of f32 or bf16 (x_dtype), y: device memory [M, rows] f32; stream: a
  // cudaStream_t (null: the default stream). Returns when y is written. A NaN or infinity in x is an
  // Error naming its row and column (y is then unspecified).
  Status apply_device(const void* x, DType x_dtype, int64_t M, float* y, void* stream = nullptr) const;
  // The same from host memory: x [M, K] (f32 or bf16) -> a new [M, rows] f32 tensor.
  Result<Tensor> apply(const TensorView& x) const;

  int64_t rows() const;
  int64_t K() const;  // logical input features (of the unslid weight for a slid one)
  WeightFormat weight_format() const;
  QuantType quant_type() const;
  CudaBackend backend() const;  // as chosen (never Auto)
  // "cuda cutlass sparse24 int8 sm_80", "cuda cusparselt slid6:8 e4m3 sm_90", "cuda cublaslt dense int8 sm_90".
  std::string kernel_name() const;
  // The GEMM a call of M tokens runs: CUTLASS's tile, the library's algorithm (after the first
  // call of M; empty before).
  std::string gemm_name(int64_t M) const;

  // The layer's parts, for src/cuda and its benchmarks (an incomplete type elsewhere).
  const cuda::CudaLayer& layer() const { return *layer_; }

 private:
  explicit CudaSparseLinear(std::unique_ptr<cuda::CudaLayer> layer);
  std::unique_ptr<cuda::CudaLayer> layer_;
};

}  // namespace nmkit
