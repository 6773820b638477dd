// Public quantization calls: validate once, allocate, split rows over the thread pool and run the
// active tier's kernel (src/cpu/*/quant_rows.cc).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cpu/kernel_table.h"
#include "nmkit/threads.h"
#include "core/thread_costs.h"
#include "quant/quantize_with.h"

namespace nmkit {
namespace {

std::string label(std::string_view name, std::string_view fallback) {
  std::string text;
  if (name.empty()) return std::string(fallback);
  text.push_back('\'');
  text.append(name);
  text.push_back('\'');
  return text;
}

std::string value_text(float value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", static_cast<double>(value));
  return buffer;
}

// The Error for a row the kernel reported as holding a NaN or infinity: finds its first column.
Error nonfinite_error(const TensorView& x, int64_t row, std::string_view name) {
  const size_t size = dtype_size(x.dtype);
  const std::byte* src = x.data + static_cast<size_t>(row * x.cols()) * size;
  for (int64_t k = 0; k < x.cols(); ++k) {
    float value;
    convert_to_f32(x.dtype, src + static_cast<size_t>(k) * size, &value, 1);
    if (!std::isfinite(value)) {
      return Error(label(name, "tensor") + ": row " + std::to_string(row) + ", column " +
                   std::to_string(k) + " is " + value_text(value) + ": not finite, cannot quantize");
    }
  }
  NMKIT_ASSERT(false);  // the kernel reported a row without a non-finite value
  return Error("");
}

Status check_input(const TensorView& x, std::string_view name) {
  if (x.shape.size() != 2) {
    return Error(label(name, "tensor") + ": quantization needs a 2-D tensor, got shape " +
                 shape_str(x.shape));
  }
  if (x.dtype != DType::F32 && x.dtype != DType::F16 && x.dtype != DType::BF16) {
    return Error(label(name, "tensor") + ": quantization needs F32, F16 or BF16 values, got " +
                 std::string(dtype_name(x.dtype)));
  }
  if (x.cols() < 1) return Error(label(name, "tensor") + ": K = 0, nothing to quantize");
  return ok_status();
}

Result<Quantized> quantize_alloc(const cpu::QuantKernels& kernels, const TensorView& x,
                                 QuantType type, const SlideGeometry* lift, std::string_view name) {
  NMKIT_TRY(check_input(x, name));
  const int64_t cols = lift != nullptr ? lift->K_prime() : x.cols();
  Quantized q;
  q.type = type;
  q.codes = Tensor::empty(quant_code_dtype(type), {x.rows(), cols});
  q.scales = Tensor::empty(DType::F32, {x.rows()});
  NMKIT_TRY(quantize_rows_with(kernels, x, type, lift, q.codes.data(), cols, q.scales.as<float>(), name));
  return q;
}

}  // namespace

Status quantize_rows_with(const cpu::QuantKernels& kernels, const TensorView& x, QuantType type,
                          const SlideGeometry* lift, std::byte* codes, int64_t codes_stride,
                          float* scales, std::string_view name, StreamStores stream) {
  NMKIT_TRY(check_input(x, name));
  const int64_t K = x.cols();
  const cpu::LiftTable* table = nullptr;
  if (lift != nullptr) {
    if (lift->K != K) {
      return Error(label(name, "tensor") + ": K = " + std::to_string(K) +
                   " but the slide geometry has K = " + std::to_string(lift->K));
    }
    // The sizes are derived from (pattern, K, align); a geometry built by hand must still be one
    // that SlideGeometry::make accepts.
    if (!SlideGeometry::make(lift->pattern, lift->K, lift->align).ok()) {
      return Error(label(name, "tensor") + ": inconsistent slide geometry (use SlideGeometry::make)");
    }
    table = &cpu::lift_table(lift->N());
  }
  const int64_t cols = lift != nullptr ? lift->K_prime() : K;
  if (codes_stride < cols) {
    return Error(label(name, "tensor") + ": codes row stride " + std::to_string(codes_stride) +
                 " is below the " + std::to_string(cols) + " codes of a row");
  }
  cpu::QuantRowsArgs args;
  args.src_dtype = x.dtype;
  args.src = x.data;
  args.src_stride = K * static_cast<int64_t>(dtype_size(x.dtype));
  args.K = K;
  args.type = type;
  args.lift = table;
  args.cols = cols;
  args.dst = codes;
  args.dst_stride = codes_stride;
  args.scales = scales;
  args.stream = stream == StreamStores::Always;

  const auto scratch_bytes = static_cast<size_t>(cpu::quant_scratch_bytes(table, K, cols));
  // Blocks of about 64 KiB of input (at least 4 rows, so a kernel's row pipeline fills), taken by
  // the pool's threads from a shared counter: a thread that is preempted or slowed by a neighbour
  // holds up one block, not a fixed half of the rows.
  const int64_t row_bytes = K * static_cast<int64_t>(dtype_size(x.dtype));
  const int64_t block = std::max<int64_t>(4, 65536 / row_bytes);
  const int64_t blocks = (x.rows() + block - 1) / block;
  std::atomic<int64_t> next_block{0};
  std::atomic<int64_t> bad_row{-1};
  const auto worker = [&](int64_t, int64_t) {
    // 64-byte aligned, so the kernels' full-vector stores into scratch never split a cache line.
    thread_local std::vector<std::byte> scratch;
    if (scratch.size() < scratch_bytes + 64) scratch.resize(scratch_bytes + 64);
    const auto address = reinterpret_cast<uintptr_t>(scratch.data());
    std::byte* aligned = scratch.data() + ((64 - address % 64) % 64);
    for (int64_t b = next_block.fetch_add(1); b < blocks; b = next_block.fetch_add(1)) {
      const int64_t bad = kernels.quantize_rows(args, b * block, std::min(x.rows(), (b + 1) * block), aligned);
      if (bad < 0) continue;
      int64_t seen = bad_row.load();
      while ((seen < 0 || bad < seen) && !bad_row.compare_exchange_weak(seen, bad)) {
      }
    }
  };
  if (blocks <= 1) {
    worker(0, 1);
  } else {
    // Split only when the rows take longer than waking the pool: the input read at one core's copy
    // rate (the codes written are a quarter of it).
    const double seconds = static_cast<double>(x.rows() * row_bytes) / kOneCoreCopyBytesPerSecond;
    const int64_t workers = std::min<int64_t>(blocks, thread_count());
    parallel_for(workers, grain_for(workers, 1, seconds), worker);
  }
  if (bad_row.load() >= 0) return nonfinite_error(x, bad_row.load(), name);
  return ok_status();
}

Status quantize_tokens_into(const TensorView& x, QuantType type, const SlideGeometry* lift,
                            std::byte* codes, int64_t codes_stride, float* scales,
                            std::string_view name) {
  auto table = cpu::kernels();
  if (!table.ok()) return table.error();
  return quantize_rows_with((*table)->quant, x, type, lift, codes, codes_stride, scales, name);
}

Result<Quantized> quantize_tokens(const TensorView& x, QuantType type, std::string_view name) {
  auto table = cpu::kernels();
  if (!table.ok()) return table.error();
  return quantize_alloc((*table)->quant, x, type, nullptr, name);
}

Result<Quantized> quantize_lift(const TensorView& x, const SlideGeometry& geometry, QuantType type,
                                std::string_view name) {
  auto table = cpu::kernels();
  if (!table.ok()) return table.error();
  return quantize_alloc((*table)->quant, x, type, &geometry, name);
}

Result<Quantized> quantize_weights(const TensorView& w, QuantType type, std::string_view name) {
  auto table = cpu::kernels();
  if (!table.ok()) return table.error();
  return quantize_alloc((*table)->quant, w, type, nullptr, name);
}

Result<QuantizedSparse24> quantize_weights(const Sparse24& w, QuantType type, std::string_view name) {
  // The values of a row hold every non-zero of the row (and zeros), so their absmax is the row's.
  auto table = cpu::kernels();
  if (!table.ok()) return table.error();
  auto q = quantize_alloc((*table)->quant, w.values.view(), type, nullptr,
                          name.empty() ? std::string_view("values") : name);
  if (!q.ok()) return q.error();
  QuantizedSparse24 out;
  out.type = type;
  out.packed.K = w.K;
  out.packed.values = std::move(q->codes);
  out.packed.meta = Tensor::copy_of(w.meta.view());
  out.scales = std::move(q->scales);
  return out;
}

}  // namespace nmkit
