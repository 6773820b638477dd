// Pruning straight into a compressed format (docs/design.md 2, "Pruning into a compressed
// format"): each pruned row is converted to the packed dtype and compressed while it is still in
// cache, so a model pruned on load never holds a dense-masked copy of a weight, nor a stacked one
// of a group.
#include <string>
#include <vector>

#include "format/elements.h"
#include "nmkit/prune.h"

namespace nmkit {
namespace {

using format_detail::name_prefix;

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
