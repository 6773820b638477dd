// nmkit's weight records: the JSON object stored in __metadata__["nmkit.NAME"] (schema in
// include/nmkit/checkpoint.h). Decoding is strict, because a record decides how bytes are read.
#include <exception>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "io/text.h"
#include "nmkit/checkpoint.h"

namespace nmkit {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// Far above any real layer, and small enough that padded sizes computed from it cannot overflow.
constexpr uint64_t kMaxDim = uint64_t{1} << 48;

// Reads a non-negative integer field that fits `T`; `where` already names file, tensor and record.
template <class T>
Status read_count(const json& object, const char* key, const std::string& where, T& out) {
  const auto it = object.find(key);
  if (it == object.end()) return Error(where + "missing field \"" + key + "\"");
  if (!it->is_number_unsigned() || it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
    return Error(where + "field \"" + key + "\" is " + io::brief(*it) + ", not a non-negative integer");
  }
  out = static_cast<T>(it->get<uint64_t>());
  return ok_status();
}

Result<std::string> get_string(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) return Error(where + "missing field \"" + key + "\"");
  if (!it->is_string()) return Error(where + "field \"" + key + "\" is " + io::brief(*it) + ", not a string");
  return it->get<std::string>();
}

Status only_fields(const json& object, std::initializer_list<std::string_view> allowed, const std::string& where) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const std::string_view name : allowed) known |= key == name;
    // A field this version does not know may change how the bytes are meant; refuse rather than guess.
    if (!known) return Error(where + "unknown field " + io::quote_name(key));
  }
  return ok_status();
}

Result<SlideGeometry> decode_slide(const json& slide, const std::string& outer) {
  const std::string where = outer + "slide: ";
  if (!slide.is_object()) return Error(where + io::brief(slide) + " is not an object");
  NMKIT_TRY(only_fields(slide, {"pattern", "N", "window", "stride", "windows_per_group", "K", "K_pad", "K_prime", "align"},
                        where));
  auto pattern_text = get_string(slide, "pattern", where);
  if (!pattern_text.ok()) return pattern_text.error();
  auto pattern = Pattern::parse(*pattern_text);
  if (!pattern.ok()) return pattern.error().with_context(where);
  int N = 0, window = 0, stride = 0, windows = 0, align = 0;
  int64_t K = 0, K_pad = 0, K_prime = 0;
  NMKIT_TRY(read_count(slide, "N", where, N));
  NMKIT_TRY(read_count(slide, "window", where, window));
  NMKIT_TRY(read_count(slide, "stride", where, stride));
  NMKIT_TRY(read_count(slide, "windows_per_group", where, windows));
  NMKIT_TRY(read_count(slide, "K", where, K));
  NMKIT_TRY(read_count(slide, "K_pad", where, K_pad));
  NMKIT_TRY(read_count(slide, "K_prime", where, K_prime));
  NMKIT_TRY(read_count(slide, "align", where, align));
  if (static_cast<uint64_t>(K) > kMaxDim) return Error(where + "field \"K\" is " + std::to_string(K) + ", above 2^48");
  auto geometry = SlideGeometry::make(*pattern, K, align);
  if (!geometry.ok()) return geometry.error().with_context(where);
  // The stored sizes are redundant with (pattern, K, align); a mismatch means the writer and this
  // reader disagree on the decomposition, so the stored columns cannot be trusted.
  const auto mismatch = [&](const char* field, int64_t stored, int64_t expected) {
    return Error(where + "field \"" + field + "\" is " + std::to_string(stored) + " but pattern " + pattern->str() +
                 " with K " + std::to_string(K) + " and align " + std::to_string(align) + " gives " +
                 std::to_string(expected));
  };
  if (N != geometry->N()) return mismatch("N", N, geometry->N());
  if (window != SlideGeometry::kWindow) return mismatch("window", window, SlideGeometry::kWindow);
  if (stride != SlideGeometry::kStride) return mismatch("stride", stride, SlideGeometry::kStride);
  if (windows != geometry->windows_per_group()) return mismatch("windows_per_group", windows, geometry->windows_per_group());
  if (K_pad != geometry->K_pad()) return mismatch("K_pad", K_pad, geometry->K_pad());
  if (K_prime != geometry->K_prime()) return mismatch("K_prime", K_prime, geometry->K_prime());
  return geometry;
}

}  // namespace

std::string_view weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::Dense: return "dense";
    case WeightFormat::Sparse24: return "sparse24";
    case WeightFormat::NM: return "nm";
  }
  NMKIT_ASSERT(false);
  return "";
}

Result<WeightFormat> parse_weight_format(std::string_view text) {
  for (const WeightFormat format : {WeightFormat::Dense, WeightFormat::Sparse24, WeightFormat::NM}) {
    if (text == weight_format_name(format)) return format;
  }
  return Error("unknown format " + io::quote_name(text) + ": expected dense, sparse24 or nm");
}

std::string_view stored_format_name(StoredFormat format) {
  if (format.format == WeightFormat::Sparse24 && format.layout == StoredLayout::CutlassSm80) return "cutlass_sm80";
  return weight_format_name(format.format);
}

Result<StoredFormat> parse_stored_format(std::string_view text) {
  if (text == "cutlass_sm80") return StoredFormat{WeightFormat::Sparse24, StoredLayout::CutlassSm80};
  auto format = parse_weight_format(text);
  if (!format.ok()) {
    return Error("unknown format " + io::quote_name(text) + ": expected dense, sparse24, nm or cutlass_sm80");
  }
  return StoredFormat{*format, StoredLayout::Canonical};
}

std::string record_key(std::string_view name) { return "nmkit." + std::string(name); }

bool is_record_value(std::string_view value) {
  const size_t first = value.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && value[first] == '{';
}

WeightRecord record_for(const Sparse24& packed) {
  WeightRecord record;
  record.format = WeightFormat::Sparse24;
  record.pattern = Pattern{2, 4};
  record.dtype = packed.dtype();
  record.shape = {packed.rows(), packed.K};
  return record;
}

WeightRecord record_for(const NMPacked& packed) {
  WeightRecord record;
  record.format = WeightFormat::NM;
  record.pattern = packed.pattern;
  record.dtype = packed.dtype();
  record.shape = {packed.rows(), packed.K};
  return record;
}

std::string encode_record(const WeightRecord& record) {
  ordered_json out = ordered_json::object();
  out["format"] = std::string(stored_format_name({record.format, record.layout}));
  out["pattern"] = record.pattern.str();
  out["dtype"] = std::string(dtype_name(record.dtype));
  out["shape"] = record.shape;
  if (record.slide) {
    const SlideGeometry& g = *record.slide;
    ordered_json slide = ordered_json::object();
    slide["pattern"] = g.pattern.str();
    slide["N"] = g.N();
    slide["window"] = SlideGeometry::kWindow;
    slide["stride"] = SlideGeometry::kStride;
    slide["windows_per_group"] = g.windows_per_group();
    slide["K"] = g.K;
    slide["K_pad"] = g.K_pad();
    slide["K_prime"] = g.K_prime();
    slide["align"] = g.align;
    out["slide"] = std::move(slide);
  }
  return out.dump();
}

Result<WeightRecord> decode_record(std::string_view file, std::string_view name, std::string_view text) {
  const std::string where = std::string(file) + ": tensor " + io::quote_name(name) + ": record " +
                            io::quote_name(record_key(name)) + ": ";
  json root;
  try {
    root = json::parse(text);
  } catch (const std::exception& e) {
    return Error(where + "not valid JSON: " + io::one_line(e.what(), 200));
  }
  if (!root.is_object()) return Error(where + io::brief(root) + " is not a JSON object");
  NMKIT_TRY(only_fields(root, {"format", "pattern", "dtype", "shape", "slide"}, where));

  WeightRecord record;
  auto format_text = get_string(root, "format", where);
  if (!format_text.ok()) return format_text.error();
  auto format = parse_stored_format(*format_text);
  if (!format.ok()) return format.error().with_context(where);
  record.format = format->format;
  record.layout = format->layout;

  auto pattern_text = get_string(root, "pattern", where);
  if (!pattern_text.ok()) return pattern_text.error();
  auto pattern = Pattern::parse(*pattern_text);
  if (!pattern.ok()) return pattern.error().with_context(where);
  record.pattern = *pattern;
  if (record.format == WeightFormat::Sparse24 && record.pattern != Pattern{2, 4}) {
    const std::string stored(stored_format_name(*format));
    return Error(where + "format " + stored + " with pattern " + record.pattern.str() + " (" + stored + " is 2:4 only)");
  }

  auto dtype_text = get_string(root, "dtype", where);
  if (!dtype_text.ok()) return dtype_text.error();
  const auto dtype = dtype_from_name(*dtype_text);
  if (!dtype.ok()) return Error(where + "unknown dtype " + io::quote_name(*dtype_text));
  record.dtype = *dtype;
  if (record.layout == StoredLayout::CutlassSm80 && record.dtype != DType::F16 && record.dtype != DType::BF16) {
    return Error(where + "format cutlass_sm80 with dtype " + *dtype_text + " (it holds F16 or BF16 values)");
  }

  const auto shape_it = root.find("shape");
  if (shape_it == root.end()) return Error(where + "missing field \"shape\"");
  const json& shape = *shape_it;
  if (!shape.is_array() || shape.size() != 2 || !shape[0].is_number_unsigned() || !shape[1].is_number_unsigned() ||
      shape[0].get<uint64_t>() > kMaxDim || shape[1].get<uint64_t>() > kMaxDim) {
    return Error(where + "shape " + io::brief(shape) + " is not [rows, K] of integers in [0, 2^48]");
  }
  record.shape = {shape[0].get<int64_t>(), shape[1].get<int64_t>()};

  const auto slide_it = root.find("slide");
  if (slide_it != root.end()) {
    auto slide = decode_slide(*slide_it, where);
    if (!slide.ok()) return slide.error();
    if (record.pattern != Pattern{2, 4}) {
      return Error(where + "slid weight has pattern " + record.pattern.str() + "; a slid weight complies with 2:4");
    }
    if (record.shape[1] != slide->K_prime()) {
      return Error(where + "slid weight has shape " + shape_str(record.shape) + " but its K_prime is " +
                   std::to_string(slide->K_prime()));
    }
    record.slide = *slide;
  }
  return record;
}

}  // namespace nmkit
