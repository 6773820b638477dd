// inspect_file and its JSON rows (include/nmkit/inspect.h): what `nmkit inspect` and Python's nmkit.inspect report.
#include "nmkit/inspect.h"

#include <algorithm>
#include <cstring>
#include <variant>
#include <nlohmann/json.hpp>

#include "nmkit/format.h"
#include "nmkit/safetensors.h"

namespace nmkit {
namespace {

// Elements equal to zero (+0 and -0; NaN is not zero), for every dtype safetensors knows.
int64_t count_zeros(const TensorView& view) {
  const auto n = static_cast<size_t>(view.numel());
  int64_t zeros = 0;
  if (is_prunable(view.dtype)) {
    // In chunks: a large tensor is never converted to f32 all at once.
    constexpr size_t kChunk = size_t{1} << 16;
    std::vector<float> buffer(std::min(n, kChunk));
    const size_t size = dtype_size(view.dtype);
    for (size_t begin = 0; begin < n; begin += kChunk) {
      const size_t count = std::min(kChunk, n - begin);
      convert_to_f32(view.dtype, view.data + begin * size, buffer.data(), count);
      zeros += std::count(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(count), 0.0f);
    }
    return zeros;
  }
  if (view.dtype == DType::F64) {
    for (size_t i = 0; i < n; ++i) {
      double value;
      std::memcpy(&value, view.data + i * 8, 8);
      zeros += value == 0.0;
    }
    return zeros;
  }
  if (view.dtype == DType::F8_E4M3 || view.dtype == DType::F8_E5M2) {
    // Sign-magnitude: 0x00 and 0x80 are the two zeros.
    for (size_t i = 0; i < n; ++i) zeros += (static_cast<uint8_t>(view.data[i]) & 0x7f) == 0;
    return zeros;
  }
  const size_t size = dtype_size(view.dtype);  // integers and bool: zero is all bytes zero
  for (size_t i = 0; i < n; ++i) {
    const std::byte* element = view.data + i * size;
    zeros += std::all_of(element, element + size, [](std::byte b) { return b == std::byte{0}; });
  }
  return zeros;
}

void check_dense(const TensorView& dense, InspectedTensor& out) {
  out.zeros = count_zeros(dense);
  out.checked = dense.shape.size() == 2 && is_floating(dense.dtype);  // compliance works on bits: F64 and F8 too
  if (!out.checked) return;
  // A pattern whose group is wider than the row has no full group: every row is one tail that
  // trivially complies, so "sparsest 8:10" for an all-ones [4, 8] said nothing (issue 13, M6).
  std::vector<Pattern> candidates;
  for (const Pattern& p : inspect_candidates()) {
    if (p.group <= dense.shape[1]) candidates.push_back(p);
  }
  out.sparsest = sparsest_compliant(dense, candidates);
  if (out.record) out.complies = !find_violation(dense, out.record->pattern).has_value();
}

}  // namespace

const std::vector<Pattern>& inspect_candidates() {
  static const std::vector<Pattern> candidates{{1, 4}, {2, 4}, {2, 8}, {4, 8}, {4, 6}, {6, 8}, {8, 10}, {14, 16}};
  return candidates;
}

double InspectedTensor::zero_fraction() const {
  const int64_t n = shape_numel(shape);
  return n > 0 ? static_cast<double>(zeros) / static_cast<double>(n) : 0.0;
}

std::string InspectedTensor::format_name() const {
  return record ? std::string(stored_format_name({record->format, record->layout})) : "-";
}

std::string InspectedTensor::format() const {
  if (!record) return "-";
  std::string text = format_name();
  if (record->slide) text += " slid";
  return text;
}

Result<std::vector<InspectedTensor>> inspect_file(const std::string& path) {
  auto kind = sniff_file_kind(path);
  if (kind.ok() && *kind == FileKind::Gguf) return inspect_gguf(path);
  // A file that cannot be read is left to SafetensorsFile::open, which names the reason.
  if (!kind.ok() && kind.error().code() == ErrorCode::InvalidFile) return kind.error();
  auto file = SafetensorsFile::open(path);
  if (!file.ok()) return file.error();
  auto stored = list_stored(*file);
  if (!stored.ok()) return stored.error();
  std::vector<InspectedTensor> result;
  for (const StoredTensor& st : *stored) {
    InspectedTensor out;
    out.name = st.name;
    out.record = st.record;
    for (const TensorInfo* part : st.parts) {
      out.parts.push_back(part->name);
      out.stored_bytes += part->end - part->begin;
    }
    if (st.record.has_value() && st.record->format != WeightFormat::Dense) {
      auto loaded = load_weight(*file, st);
      if (!loaded.ok()) return loaded.error();
      Tensor dense;
      if (auto* s24 = std::get_if<Sparse24>(&*loaded)) {
        dense = decompress(*s24);
      } else if (auto* nm = std::get_if<NMPacked>(&*loaded)) {
        dense = decompress(*nm);
      } else {
        return Error(ErrorCode::InvalidFile, "record says " + std::string(stored_format_name({st.record->format, st.record->layout})) +
                                                 " but the parts load as a dense tensor")
            .with_file(path)
            .with_tensor(st.name);
      }
      out.dtype = dense.dtype();
      out.shape = dense.shape();
      check_dense(dense.view(), out);
    } else {
      NMKIT_ASSERT(st.parts.size() == 1);
      const TensorView view = file->view(*st.parts[0]);
      out.dtype = view.dtype;
      out.shape = view.shape;
      check_dense(view, out);
    }
    result.push_back(std::move(out));
  }
  return result;
}

std::string inspect_json(const std::string& path, const std::vector<InspectedTensor>& tensors, int indent) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : tensors) {
    nlohmann::json entry{
        {"name", t.name},
        {"dtype", t.stored_type.empty() ? std::string(dtype_name(t.dtype)) : t.stored_type},
        {"shape", t.shape},
        {"format", t.record ? nlohmann::json(t.format_name()) : nullptr},
        {"pattern", t.record ? nlohmann::json(t.record->pattern.str()) : nullptr},
        {"zero_fraction", t.zero_fraction()},
        {"zeros", t.zeros},
        {"sparsest_pattern", t.sparsest ? nlohmann::json(t.sparsest->str()) : nullptr},
        {"complies_with_pattern", t.complies ? nlohmann::json(*t.complies) : nullptr},
        {"parts", t.parts},
        {"stored_bytes", t.stored_bytes},
    };
    if (t.record && t.record->slide) entry["slid"] = true;
    list.push_back(std::move(entry));
  }
  return nlohmann::json{{"file", path}, {"tensors", std::move(list)}}.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace nmkit
