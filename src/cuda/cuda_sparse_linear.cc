// CudaSparseLinear (include/nmkit/cuda_linear.h): the weight quantized and packed on the host by the
// CPU's rules (src/cuda/device_layout.h), uploaded once; each call runs quantize + lift, the
// backend's GEMM to the accumulators and the scale kernel, on one stream (src/cuda/cuda_layer.h).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <string>

#include "cuda/cuda_layer.h"
#include "cuda/cuda_status.h"
#include "cuda/epilogue.h"
#include "cuda/quant_lift.h"
#include "cuda/sparse_gemm.h"
#include "nmkit/slide.h"

namespace nmkit {
namespace cuda {

DeviceBuffer::~DeviceBuffer() {
  if (ptr != nullptr) cudaFree(ptr);
}

Status DeviceBuffer::reserve(size_t n) {
  if (n <= bytes) return ok_status();
  if (ptr != nullptr) cudaFree(ptr);
  ptr = nullptr;
  bytes = 0;
  NMKIT_CUDA_TRY(cudaMalloc(&ptr, n));
  bytes = n;
  return ok_status();
}

Status DeviceBuffer::upload(const void* src, size_t n) {
  NMKIT_TRY(reserve(n));
  NMKIT_CUDA_TRY(cudaMemcpy(ptr, src, n, cudaMemcpyHostToDevice));
  return ok_status();
}

CudaLayer::~CudaLayer() {
  if (bad_row_host != nullptr) cudaFreeHost(bad_row_host);
}

std::string CudaLayer::name() const {
  const std::string form = format == WeightFormat::Dense ? "dense"
                           : geometry                    ? "slid" + geometry->pattern.str()
                                                         : "sparse24";
  return "cuda " + std::string(cuda_backend_name(backend)) + " " + form + " " + std::string(quant_type_name(type)) +
         " sm_" + std::to_string(sm);
}

SparseTile CudaLayer::tile_for(int64_t M) const {
  const GemmGeometry g = gemm_geometry(M);
  return type == QuantType::Int8 ? choose_sparse_tile(g.rows_gemm, g.tokens_gemm, sms, tiles) : SparseTile::k128x128;
}

std::string CudaLayer::gemm_name(int64_t M) const {
  const GemmGeometry g = gemm_geometry(M);
  switch (backend) {
    case CudaBackend::Cutlass: return "CUTLASS SparseGemm " + sparse_tile_name(tile_for(M)) + " 3 stages";
    case CudaBackend::CusparseLt: return cusparselt->describe(g.tokens_gemm);
    default: return cublas->describe({g.rows_gemm, g.tokens_gemm, K_x, lift.e4m3});
  }
}

Status CudaLayer::reserve(int64_t M) const {
  const GemmGeometry g = gemm_geometry(M);
  NMKIT_TRY(codes.reserve(static_cast<size_t>(g.tokens_gemm * K_x)));
  NMKIT_TRY(scale_x.reserve(static_cast<size_t>(g.tokens_gemm) * sizeof(float)));
  NMKIT_TRY(bad_row.reserve(sizeof(int64_t)));
  NMKIT_TRY(acc.reserve(static_cast<size_t>(g.acc_elements()) * 4));
  return ok_status();
}

Status CudaLayer::quantize(const void* x, DType x_dtype, int64_t M, cudaStream_t stream) const {
  // All bits set: above every row index, lowered by the kernel to the first non-finite row.
  NMKIT_CUDA_TRY(cudaMemsetAsync(bad_row.ptr, 0xFF, sizeof(int64_t), stream));
  NMKIT_CUDA_TRY(quantize_lift(x, x_dtype == DType::BF16, M, K, lift, codes.as<uint8_t>(), K_x, scale_x.as<float>(),
                               bad_row.as<int64_t>(), stream));
  return ok_status();
}

Status CudaLayer::gemm(int64_t M, cudaStream_t stream, std::optional<SparseTile> tile) const {
  const GemmGeometry g = gemm_geometry(M);
  switch (backend) {
    case CudaBackend::Cutlass: {
      SparseGemmArgs args;
      args.rows = g.rows_gemm;
      args.tokens = g.tokens_gemm;
      args.K = K_x;
      args.values = values.ptr;
      args.meta = meta.ptr;
      args.x = codes.ptr;
      args.acc = acc.ptr;
      NMKIT_CUDA_TRY(type == QuantType::Int8 ? sparse_gemm_int8(args, tile.value_or(tile_for(M)), stream)
                                             : sparse_gemm_e4m3_sm89(args, stream));
      return ok_status();
    }
    case CudaBackend::CusparseLt:
      return cusparselt->run(g.tokens_gemm, codes.ptr, acc.ptr, stream);
    default:
      return cublas->run({g.rows_gemm, g.tokens_gemm, K_x, lift.e4m3}, dense_codes.ptr, codes.ptr, acc.ptr, stream);
  }
}

Status CudaLayer::epilogue(int64_t M, float* y, cudaStream_t stream) const {
  NMKIT_CUDA_TRY(scale_epilogue(acc.ptr, type == QuantType::Int8, gemm_geometry(M).acc, M, rows, scale_x.as<float>(),
                                scale_w.as<float>(), bias.as<const float>(), y, stream));
  return ok_status();
}

Result<int64_t> CudaLayer::first_bad_row(int64_t M, cudaStream_t stream) const {
  NMKIT_CUDA_TRY(cudaMemcpyAsync(bad_row_host, bad_row.ptr, sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  NMKIT_CUDA_TRY(cudaStreamSynchronize(stream));
  const auto bad = static_cast<uint64_t>(*bad_row_host);
  return bad < static_cast<uint64_t>(M) ? static_cast<int64_t>(bad) : M;
}

namespace {

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
  l.search = options.search;
  l.device = options.device;
  l.sm = device_sm(options.device);
  NMKIT_CUDA_TRY(cudaDeviceGetAttribute(&l.sms, cudaDevAttrMultiProcessorCount, options.device));
  l.rows = codes.rows();
  l.K = K;
  l.geometry = geometry;
  l.K_x = round_up(codes.cols(), kAlignK);
  l.tiles = int8_tiles_built();
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

  NMKIT_CUDA_TRY(cudaMallocHost(reinterpret_cast<void**>(&l.bad_row_host), sizeof(int64_t)));
  NMKIT_TRY(l.scale_w.upload(scales.data(), scales.nbytes()));
  auto staged = stage_weight(l.backend, codes, sparse, l.K_x);
  if (!staged.ok()) return staged.error();
  if (l.backend == CudaBackend::Cutlass) {
    NMKIT_TRY(l.values.upload(staged->values.data(), staged->values.nbytes()));
    NMKIT_TRY(l.meta.upload(staged->meta.data(), staged->meta.nbytes()));
  } else {
    NMKIT_TRY(l.dense_codes.upload(staged->dense.data(), staged->dense.nbytes()));
  }
  if (l.backend == CudaBackend::CublasLt) {
    auto gemm = CublasLtGemm::make(l.search);
    if (!gemm.ok()) return gemm.error();
    l.cublas = std::move(*gemm);
  } else if (l.backend == CudaBackend::CusparseLt) {
    auto gemm = CusparseLtGemm::make(l.dense_codes.ptr, gemm_rows(l.backend, l.rows), l.K_x, l.lift.e4m3, l.search,
                                     nullptr);
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
  const cuda::CudaLayer& l = *layer_;
  if (M < 0) return Error(ErrorCode::InvalidArgument, "M " + std::to_string(M) + " < 0");
  if (x_dtype != DType::F32 && x_dtype != DType::BF16) {
    return Error(ErrorCode::Unsupported, "activations " + std::string(dtype_name(x_dtype)) + " are not F32 or BF16");
  }
  if (M == 0) return ok_status();
  NMKIT_CUDA_TRY(cudaSetDevice(l.device));
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  std::lock_guard<std::mutex> lock(l.scratch);
  NMKIT_TRY(l.reserve(M));
  NMKIT_TRY(l.quantize(x, x_dtype, M, stream));
  NMKIT_TRY(l.gemm(M, stream));
  NMKIT_TRY(l.epilogue(M, y, stream));
  auto bad = l.first_bad_row(M, stream);
  if (!bad.ok()) return bad.error();
  if (*bad < M) {  // name the column too: read the row back
    const size_t es = dtype_size(x_dtype);
    std::vector<std::byte> row(static_cast<size_t>(l.K) * es);
    NMKIT_CUDA_TRY(cudaMemcpy(row.data(), static_cast<const std::byte*>(x) + static_cast<size_t>(*bad * l.K) * es,
                              row.size(), cudaMemcpyDeviceToHost));
    std::vector<float> values(static_cast<size_t>(l.K));
    convert_to_f32(x_dtype, row.data(), values.data(), static_cast<size_t>(l.K));
    int64_t column = 0;
    while (column < l.K && std::isfinite(values[static_cast<size_t>(column)])) ++column;
    return Error(ErrorCode::InvalidValue, "not finite").with_operand("activations").with_row(*bad).with_column(column)
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
std::string CudaSparseLinear::gemm_name(int64_t M) const { return layer_->gemm_name(M); }

}  // namespace nmkit
