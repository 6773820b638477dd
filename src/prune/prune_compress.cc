// Pruning straight into a compressed format (docs/design.md 2, "Pruning into a compressed
// format"): each pruned row is converted to the packed dtype and compressed while it is still in
// cache, so a model pruned on load never holds a dense-masked copy of a weight, nor a stacked one
// of a group.
#include <algorithm>
#include <atomic>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/kernel_table.h"
#include "format/elements.h"
#include "nmkit/prune.h"
#include "nmkit/threads.h"

namespace nmkit {
namespace {

using format_detail::name_prefix;

// A row's values and its mask bits or meta nibbles.
std::byte* row_values(NMPacked& out, int64_t r) {
  return out.values.data() + static_cast<size_t>(r * out.groups() * out.pattern.keep) * dtype_size(out.dtype());
}
uint8_t* row_bits(NMPacked& out, int64_t r) { return out.mask.as<uint8_t>() + r * out.mask_stride(); }
std::byte* row_values(Sparse24& out, int64_t r) {
  return out.values.data() + static_cast<size_t>(r * out.K_pad() / 2) * dtype_size(out.dtype());
}
uint8_t* row_bits(Sparse24& out, int64_t r) { return out.meta.as<uint8_t>() + r * out.meta_stride(); }

// The fused kernel (src/cpu/prune_kernels.h) where it applies: magnitude, the packed dtype the
// weight's own, no sums asked for, a group of 2, 4, 8 or 16, and a tier that has it. It computes what
// the general path computes, byte for byte; a NaN or infinity sends the tensor to the general path,
// which names the first one. Returns whether the rows were written.
template <class Packed>
bool prune_pack_fused(const TensorView& w, Pattern pattern, PruneMethod method, Packed& out, int64_t row0,
                      PruneSums* sums) {
  if (method != PruneMethod::Magnitude || sums != nullptr || w.dtype != out.dtype() || w.shape.size() != 2 ||
      w.data == nullptr) {
    return false;
  }
  if (pattern.group != 2 && pattern.group != 4 && pattern.group != 8 && pattern.group != 16) return false;
  if (!Pattern::make(pattern.keep, pattern.group).ok()) return false;  // the general path names the error
  auto table = cpu::kernels();
  if (!table.ok()) return false;
  const cpu::PruneKernels& kernels = (*table)->prune;
  const bool wide = dtype_size(w.dtype) == 4;
  if (wide ? kernels.prune_pack32 == nullptr : kernels.prune_pack16 == nullptr) return false;
  cpu::PrunePackRow args;
  args.K = w.cols();
  args.keep = pattern.keep;
  args.group = pattern.group;
  args.sparse24 = std::is_same_v<Packed, Sparse24>;
  args.magnitude = static_cast<uint32_t>(format_detail::magnitude_bits_mask(w.dtype));
  args.non_finite = w.dtype == DType::F32 ? 0x7F800000u : (w.dtype == DType::BF16 ? 0x7F80u : 0x7C00u);
  std::atomic<bool> finite{true};
  const int64_t rows = w.rows(), K = w.cols();
  if (rows == 0 || K == 0) return false;
  parallel_for(rows, std::max<int64_t>(1, 65536 / K), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1 && finite.load(std::memory_order_relaxed); ++r) {
      const std::byte* src = w.data + static_cast<size_t>(r * K) * dtype_size(w.dtype);
      std::byte* values = row_values(out, row0 + r);
      uint8_t* bits = row_bits(out, row0 + r);
      const bool ok = wide ? kernels.prune_pack32(args, reinterpret_cast<const uint32_t*>(src),
                                                  reinterpret_cast<uint32_t*>(values), bits)
                           : kernels.prune_pack16(args, reinterpret_cast<const uint16_t*>(src),
                                                  reinterpret_cast<uint16_t*>(values), bits);
      if (!ok) finite.store(false, std::memory_order_relaxed);
    }
  });
  return finite.load();
}

template <class Packed>
Status prune_compress_rows(const TensorView& w, Pattern pattern, PruneMethod method, const ScoreInputs& inputs,
                           Packed& out, int64_t row0, PruneSums* sums, std::string_view name) {
  if (w.shape.size() == 2) {
    if (w.cols() != out.K) {
      return Error(name_prefix(name) + "has " + std::to_string(w.cols()) + " columns, the packed tensor K " +
                   std::to_string(out.K));
    }
    if (row0 < 0 || w.rows() > out.rows() - row0) {
      return Error(name_prefix(name) + "rows [" + std::to_string(row0) + ", " + std::to_string(row0 + w.rows()) +
                   ") do not fit the packed tensor's " + std::to_string(out.rows()) + " rows");
    }
  }
  if (!is_prunable(out.dtype())) {
    return Error(name_prefix(name) + "cannot compress into dtype " + std::string(dtype_name(out.dtype())));
  }
  if (prune_pack_fused(w, pattern, method, out, row0, sums)) return ok_status();
  const int64_t K = out.K;
  const DType to = out.dtype();
  const bool convert = w.dtype != to;
  const PrunedRowSink sink = [&](int64_t r, const std::byte* masked) {
    const std::byte* row = masked;
    if (convert) {  // as the whole tensor would be converted: to f32, then to the packed dtype
      thread_local std::vector<float> wide;
      thread_local std::vector<std::byte> narrow;
      wide.resize(static_cast<size_t>(K));
      narrow.resize(static_cast<size_t>(K) * dtype_size(to));
      convert_to_f32(w.dtype, masked, wide.data(), static_cast<size_t>(K));
      convert_from_f32(to, wide.data(), narrow.data(), static_cast<size_t>(K));
      row = narrow.data();
    }
    // A pruned row keeps at most `keep` non-zeros per group, and conversion adds none.
    const std::optional<Violation> violation = compress_row(row, row0 + r, out);
    NMKIT_ASSERT(!violation);
  };
  return prune_rows_to(w, pattern, method, inputs, sink, sums, name);
}

}  // namespace

Status prune_compress(const TensorView& w, Pattern pattern, PruneMethod method, const ScoreInputs& inputs,
                      NMPacked& out, int64_t row0, PruneSums* sums, std::string_view name) {
  if (pattern.keep != out.pattern.keep || pattern.group != out.pattern.group) {
    return Error(name_prefix(name) + "pattern " + pattern.str() + " does not match the packed tensor's " +
                 out.pattern.str());
  }
  return prune_compress_rows(w, pattern, method, inputs, out, row0, sums, name);
}

Status prune_compress(const TensorView& w, Pattern pattern, PruneMethod method, const ScoreInputs& inputs,
                      Sparse24& out, int64_t row0, PruneSums* sums, std::string_view name) {
  if (pattern.keep != 2 || pattern.group != 4) {
    return Error(name_prefix(name) + "pattern " + pattern.str() + " cannot be packed as 2:4");
  }
  return prune_compress_rows(w, pattern, method, inputs, out, row0, sums, name);
}

}  // namespace nmkit
