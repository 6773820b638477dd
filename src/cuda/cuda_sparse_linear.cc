// CudaSparseLinear (include/nmkit/cuda_linear.h): the weight quantized and packed on the host by the
// CPU's rules, uploaded once; each call runs quantize + lift, the backend's GEMM and, for the library
// backends, the scale kernel, on one stream.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "cuda/cuda_plan.h"
#include "cuda/cuda_status.h"
#include "cuda/epilogue.h"
#include "cuda/library_gemm.h"
#include "cuda/quant_lift.h"
#include "cuda/sparse_gemm.h"
#include "cuda/weight_padding.h"
#include "nmkit/cuda_linear.h"
#include "nmkit/cutlass_sm80.h"
#include "nmkit/slide.h"

namespace nmkit {
namespace cuda {
namespace {

// X codes and weight rows are padded to whole threadblock tiles of CUTLASS's K (128): its sparse
// GEMM refuses other K, since metadata read past the end would be zero-filled and 0 is no valid
// nibble (cutlass/gemm/kernel/sparse_gemm.h, can_implement). One padding for every backend.
constexpr int64_t kAlignK = 128;

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// Device memory that frees itself.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  Status reserve(size_t n) {
    if (n <= bytes) return ok_status();
    if (ptr != nullptr) cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
    NMKIT_CUDA_TRY(cudaMalloc(&ptr, n));
    bytes = n;
    return ok_status();
  }
  Status upload(const void* src, size_t n) {
    NMKIT_TRY(reserve(n));
    NMKIT_CUDA_TRY(cudaMemcpy(ptr, src, n, cudaMemcpyHostToDevice));
    return ok_status();
  }
  template <class T>
  T* as() const { return static_cast<T*>(ptr); }
};

// Compute capability as 10 * major + minor; 0 for no such device (the error is cleared).
int device_sm(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return 10 * major + minor;
}

// The token count a backend's GEMM runs: cuSPARSELt takes 8-bit dimensions in multiples of 32,
// CUTLASS's sparse GEMM token counts in multiples of 16 (its B alignment). The extra columns of X's
// codes and of the results are scratch that nothing reads.
int64_t gemm_tokens(CudaBackend backend, int64_t M) {
  switch (backend) {
    case CudaBackend::CusparseLt: return round_up(M, 32);
    case CudaBackend::Cutlass: return round_up(M, 16);
    default: return M;
  }
}

}  // namespace

struct CudaLayer {
  WeightFormat format = WeightFormat::Dense;
  QuantType type = QuantType::Int8;
  CudaBackend backend = CudaBackend::Auto;
  int device = 0;
  int sm = 0;
  int64_t rows = 0, K = 0, K_x = 0;
  std::optional<SlideGeometry> geometry;
  LiftRows lift;
  DeviceBuffer values, meta, dense_codes, scale_w, bias;
  std::unique_ptr<CublasLtGemm> cublas;
  std::unique_ptr<CusparseLtGemm> cusparselt;
  // Per-call scratch (X codes, token scales, the first bad row, accumulators, CUTLASS's Y for a
  // token count it pads), shared by calls under a lock: a layer runs one call at a time.
  mutable std::mutex scratch_lock;
  mutable DeviceBuffer codes, scale_x, bad_row, acc, y_pad;

  std::string name() const {
    std::string form = format == WeightFormat::Dense ? "dense"
                       : geometry                    ? "slid" + geometry->pattern.str()
                                                     : "sparse24";
    return "cuda " + std::string(cuda_backend_name(backend)) + " " + form + " " +
           std::string(quant_type_name(type)) + " sm_" + std::to_string(sm);
  }
};

namespace {

// The shared part of every constructor: the device, the backend, the weight's codes on the device.
// codes: the quantized weight [rows, K_in]; sparse: the same codes as 2:4 (null for a dense weight).
Result<std::unique_ptr<CudaLayer>> build(const Tensor& codes, const Sparse24* sparse, const Tensor& scales,
                                         int64_t K, std::optional<SlideGeometry> geometry,
                                         const CudaLinearOptions& options) {
  const WeightFormat format = sparse != nullptr ? WeightFormat::Sparse24 : WeightFormat::Dense;
  if (device_sm(options.device) < 80) {
    return Error(ErrorCode::Unsupported, "CUDA: no device " + std::to_string(options.device) +
                                             " of compute capability 8.0 or more");
  }
  NMKIT_CUDA_TRY(cudaSetDevice(options.device));
  auto layer = std::make_unique<CudaLayer>();
  CudaLayer& l = *layer;
  l.format = format;
  l.type = options.type;
  l.device = options.device;
  l.sm = device_sm(options.device);
  l.rows = codes.rows();
  l.K = K;
  l.geometry = geometry;
  const int64_t K_in = codes.cols();
  l.K_x = round_up(K_in, kAlignK);
  if (l.rows % 16 != 0) {
    return Error(ErrorCode::Unsupported, "CUDA linear: rows " + std::to_string(l.rows) +
                                             " is not a multiple of 16 (the 8-bit metadata interleave)");
  }
  const bool cusparselt_loads = format != WeightFormat::Dense && CusparseLtGemm::load().ok();
  auto backend = choose_backend(format, options.type, options.backend, l.sm, cusparselt_loads);
  if (!backend.ok()) return backend.error();
  l.backend = *backend;

  l.lift.K = K;
  l.lift.cols = l.K_x;
  l.lift.e4m3 = options.type == QuantType::E4M3;
  l.lift.real = geometry ? geometry->K_prime_raw() : K;
  l.lift.in_group = geometry ? 2 * geometry->N() : 4;
  l.lift.out_group = geometry ? 4 * (geometry->N() - 1) : 4;

  NMKIT_TRY(l.scale_w.upload(scales.data(), scales.nbytes()));
  if (l.backend == CudaBackend::Cutlass) {
    auto layout = to_cutlass_sm80(pad_sparse24(*sparse, l.K_x), "weight");
    if (!layout.ok()) return layout.error();
    NMKIT_ASSERT(layout->rows_pad() == l.rows && layout->K_pad() == l.K_x);
    NMKIT_TRY(l.values.upload(layout->values.data(), layout->values.nbytes()));
    NMKIT_TRY(l.meta.upload(layout->meta.data(), layout->meta.nbytes()));
  } else {
    const Tensor padded = pad_codes(codes, l.K_x);
    NMKIT_TRY(l.dense_codes.upload(padded.data(), padded.nbytes()));
  }
  if (l.backend == CudaBackend::CublasLt) {
    auto gemm = CublasLtGemm::make();
    if (!gemm.ok()) return gemm.error();
    l.cublas = std::move(*gemm);
  } else if (l.backend == CudaBackend::CusparseLt) {
    auto gemm = CusparseLtGemm::make(l.dense_codes.ptr, l.rows, l.K_x, l.lift.e4m3, nullptr);
    if (!gemm.ok()) return gemm.error();
    l.cusparselt = std::move(*gemm);
  }
  return layer;
}

}  // namespace
}  // namespace cuda

std::string_view cuda_backend_name(CudaBackend backend) {
  switch (backend) {
    case CudaBackend::Auto: return "auto";
    case CudaBackend::Cutlass: return "cutlass";
    case CudaBackend::CusparseLt: return "cusparselt";
    case CudaBackend::CublasLt: return "cublaslt";
  }
  return "?";
}

Result<CudaBackend> cuda_backend_from_name(std::string_view name) {
  for (CudaBackend b : {CudaBackend::Auto, CudaBackend::Cutlass, CudaBackend::CusparseLt, CudaBackend::CublasLt}) {
    if (name == cuda_backend_name(b)) return b;
  }
  return Error(ErrorCode::InvalidArgument, "unknown CUDA backend " + quote_name(name) +
                                               " (expected auto, cutlass, cusparselt or cublaslt)");
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  int capable = 0;
  for (int d = 0; d < count; ++d) capable += cuda::device_sm(d) >= 80 ? 1 : 0;
  return capable;
}

CudaSparseLinear::CudaSparseLinear(std::unique_ptr<cuda::CudaLayer> layer) : layer_(std::move(layer)) {}
CudaSparseLinear::CudaSparseLinear(CudaSparseLinear&&) noexcept = default;
CudaSparseLinear& CudaSparseLinear::operator=(CudaSparseLinear&&) noexcept = default;
CudaSparseLinear::~CudaSparseLinear() = default;

Result<CudaSparseLinear> CudaSparseLinear::dense(const TensorView& weight, const CudaLinearOptions& options) {
  auto q = quantize_weights(weight, options.type, "weight");
  if (!q.ok()) return q.error();
  auto layer = cuda::build(q->codes, nullptr, q->scales, weight.cols(), std::nullopt, options);
  if (!layer.ok()) return layer.error();
  return CudaSparseLinear(std::move(*layer));
}

Result<CudaSparseLinear> CudaSparseLinear::sparse24(const Sparse24& weight, const CudaLinearOptions& options) {
  auto q = quantize_weights(weight, options.type, "weight");
  if (!q.ok()) return q.error();
  // decompress copies elements by size: the codes' dense form, for the library backends.
  auto layer = cuda::build(decompress(q->packed), &q->packed, q->scales, weight.K, std::nullopt, options);
  if (!layer.ok()) return layer.error();
  return CudaSparseLinear(std::move(*layer));
}

Result<CudaSparseLinear> CudaSparseLinear::slid(const TensorView& slid_weight, const SlideGeometry& geometry,
                                                const CudaLinearOptions& options) {
  if (slid_weight.shape.size() != 2 || slid_weight.cols() != geometry.K_prime()) {
    return Error(ErrorCode::InvalidArgument, "slid weight must be [rows, " + std::to_string(geometry.K_prime()) +
                                                 "], got " + shape_str(slid_weight.shape));
  }
  auto s24 = compress_sparse24(slid_weight, "slid weight");  // the 2:4 check of every window
  if (!s24.ok()) return s24.error();
  auto q = quantize_weights(*s24, options.type, "slid weight");
  if (!q.ok()) return q.error();
  auto layer = cuda::build(decompress(q->packed), &q->packed, q->scales, geometry.K, geometry, options);
  if (!layer.ok()) return layer.error();
  return CudaSparseLinear(std::move(*layer));
}

Status CudaSparseLinear::set_bias(const TensorView& bias) {
  if (bias.shape.size() != 1 || bias.shape[0] != layer_->rows) {
    return Error(ErrorCode::InvalidArgument, "bias must be [" + std::to_string(layer_->rows) + "], got " +
                                                 shape_str(bias.shape));
  }
  const std::vector<float> values = to_f32(bias);
  NMKIT_CUDA_TRY(cudaSetDevice(layer_->device));
  return layer_->bias.upload(values.data(), values.size() * sizeof(float));
}

Status CudaSparseLinear::apply_device(const void* x, DType x_dtype, int64_t M, float* y, void* stream_ptr) const {
  using namespace cuda;
  const CudaLayer& l = *layer_;
  if (M < 0) return Error(ErrorCode::InvalidArgument, "M " + std::to_string(M) + " < 0");
  if (x_dtype != DType::F32 && x_dtype != DType::BF16) {
    return Error(ErrorCode::Unsupported, "activations " + std::string(dtype_name(x_dtype)) + " are not F32 or BF16");
  }
  if (M == 0) return ok_status();
  NMKIT_CUDA_TRY(cudaSetDevice(l.device));
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  std::lock_guard<std::mutex> lock(l.scratch_lock);
  const int64_t M_gemm = gemm_tokens(l.backend, M);
  NMKIT_TRY(l.codes.reserve(static_cast<size_t>(M_gemm * l.K_x)));
  NMKIT_TRY(l.scale_x.reserve(static_cast<size_t>(M_gemm) * sizeof(float)));
  NMKIT_TRY(l.bad_row.reserve(sizeof(int64_t)));
  NMKIT_CUDA_TRY(cudaMemcpyAsync(l.bad_row.ptr, &M, sizeof(int64_t), cudaMemcpyHostToDevice, stream));
  NMKIT_CUDA_TRY(quantize_lift(x, x_dtype == DType::BF16, M, l.K, l.lift, l.codes.as<uint8_t>(), l.K_x,
                               l.scale_x.as<float>(), l.bad_row.as<int64_t>(), stream));
  const auto* bias = l.bias.as<const float>();
  if (l.backend == CudaBackend::Cutlass) {
    SparseGemmArgs args;
    args.rows = l.rows;
    args.tokens = M_gemm;
    args.K = l.K_x;
    args.values = l.values.ptr;
    args.meta = l.meta.ptr;
    args.x = l.codes.ptr;
    args.scale_w = l.scale_w.as<const float>();
    args.scale_x = l.scale_x.as<const float>();
    args.bias = bias;
    args.y = y;
    if (M_gemm != M) {  // the padded tokens' rows of Y go to scratch, then the real ones to y
      NMKIT_TRY(l.y_pad.reserve(static_cast<size_t>(M_gemm * l.rows) * sizeof(float)));
      args.y = l.y_pad.as<float>();
    }
    NMKIT_CUDA_TRY(l.type == QuantType::Int8 ? sparse_gemm_int8_sm80(args, stream) : sparse_gemm_e4m3_sm89(args, stream));
    if (M_gemm != M) {
      NMKIT_CUDA_TRY(cudaMemcpyAsync(y, args.y, static_cast<size_t>(M * l.rows) * sizeof(float),
                                     cudaMemcpyDeviceToDevice, stream));
    }
  } else {
    NMKIT_TRY(l.acc.reserve(static_cast<size_t>(M_gemm * l.rows) * 4));
    if (l.backend == CudaBackend::CublasLt) {
      NMKIT_TRY(l.cublas->run({l.rows, M, l.K_x, l.lift.e4m3}, l.dense_codes.ptr, l.codes.ptr, l.acc.ptr, stream));
    } else {
      NMKIT_TRY(l.cusparselt->run(M_gemm, l.codes.ptr, l.acc.ptr, stream));
    }
    NMKIT_CUDA_TRY(scale_epilogue(l.acc.ptr, l.type == QuantType::Int8, M, l.rows, l.scale_x.as<const float>(),
                                  l.scale_w.as<const float>(), bias, y, stream));
  }
  int64_t bad = M;
  NMKIT_CUDA_TRY(cudaMemcpyAsync(&bad, l.bad_row.ptr, sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  NMKIT_CUDA_TRY(cudaStreamSynchronize(stream));
  if (bad < M) {  // name the column too: read the row back
    const size_t es = dtype_size(x_dtype);
    std::vector<std::byte> row(static_cast<size_t>(l.K) * es);
    NMKIT_CUDA_TRY(cudaMemcpy(row.data(), static_cast<const std::byte*>(x) + static_cast<size_t>(bad * l.K) * es,
                              row.size(), cudaMemcpyDeviceToHost));
    std::vector<float> values(static_cast<size_t>(l.K));
    convert_to_f32(x_dtype, row.data(), values.data(), static_cast<size_t>(l.K));
    int64_t column = 0;
    while (column < l.K && std::isfinite(values[static_cast<size_t>(column)])) ++column;
    return Error(ErrorCode::InvalidValue, "not finite").with_operand("activations").with_row(bad).with_column(column)
        .with_value(std::to_string(values[static_cast<size_t>(std::min(column, l.K - 1))]));
  }
  return ok_status();
}

Result<Tensor> CudaSparseLinear::apply(const TensorView& x) const {
  if (x.shape.size() != 2 || x.cols() != layer_->K) {
    return Error(ErrorCode::InvalidArgument, "x must be [M, " + std::to_string(layer_->K) + "], got " + shape_str(x.shape));
  }
  const int64_t M = x.rows();
  Tensor y = Tensor::empty(DType::F32, {M, layer_->rows});
  if (M == 0) return y;
  NMKIT_CUDA_TRY(cudaSetDevice(layer_->device));
  cuda::DeviceBuffer dx, dy;
  NMKIT_TRY(dx.upload(x.data, x.nbytes()));
  NMKIT_TRY(dy.reserve(y.nbytes()));
  NMKIT_TRY(apply_device(dx.ptr, x.dtype, M, dy.as<float>()));
  NMKIT_CUDA_TRY(cudaMemcpy(y.data(), dy.ptr, y.nbytes(), cudaMemcpyDeviceToHost));
  return y;
}

int64_t CudaSparseLinear::rows() const { return layer_->rows; }
int64_t CudaSparseLinear::K() const { return layer_->K; }
WeightFormat CudaSparseLinear::weight_format() const { return layer_->format; }
QuantType CudaSparseLinear::quant_type() const { return layer_->type; }
CudaBackend CudaSparseLinear::backend() const { return layer_->backend; }
std::string CudaSparseLinear::kernel_name() const { return layer_->name(); }

}  // namespace nmkit
