#include "io/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>

#include "io/text.h"

namespace nmkit::io {
namespace {

using json = nlohmann::json;

// A first, SAX pass over the header: finds the first duplicate key of any object (nlohmann's DOM
// keeps the last value of a duplicated key silently, and a header naming a tensor twice is
// ambiguous), records the order of the top-level keys, and the syntax error if there is one.
// It is a separate pass because nlohmann's callback parser rescans the parent object after every
// nested one, which is quadratic in the number of tensors (minutes for 20k tensors).
class KeyScanner final : public nlohmann::json_sax<json> {
 public:
  std::optional<std::string> duplicate;
  std::optional<std::string> syntax_error;
  std::optional<std::string> limit;  // a cap of safetensors_header.h exceeded (parsing stopped)
  std::unordered_map<std::string, size_t> position;  // top-level key -> order in the header

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool start_object(std::size_t) override {
    open_objects_.emplace_back();
    return enter();
  }
  bool end_object() override {
    --depth_;
    if (!open_objects_.empty()) open_objects_.pop_back();
    return true;
  }
  bool key(string_t& key) override {
    const size_t depth = open_objects_.size();
    if (key.size() > kMaxNameBytes) {
      limit = "key " + quote_name(key) + " of " + std::to_string(key.size()) + " bytes exceeds the limit of " +
              std::to_string(kMaxNameBytes) + " bytes for tensor names and keys";
      return false;
    }
    if (depth == 1 && key != "__metadata__" && ++tensors_ > kMaxTensors) {
      limit = "more than " + std::to_string(kMaxTensors) + " tensors in one header exceed the limit";
      return false;
    }
    if (depth == 1) {
      tensor_ = key;
      position.emplace(key, position.size());
    }
    if (depth > 0 && !open_objects_.back().insert(key).second && !duplicate) {
      if (depth == 1) {
        duplicate = key == "__metadata__" ? std::string("duplicate \"__metadata__\"")
                                          : "tensor " + quote_name(key) + ": listed twice";
      } else if (tensor_ == "__metadata__") {
        duplicate = "__metadata__: duplicate key " + quote_name(key);
      } else {
        duplicate = "tensor " + quote_name(tensor_) + ": duplicate field " + quote_name(key);
      }
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    syntax_error = one_line(ex.what(), 240);
    return false;
  }

 private:
  bool enter() {
    if (++depth_ > kMaxJsonDepth) {
      limit = (open_objects_.empty() || tensor_.empty() ? std::string() : "tensor " + quote_name(tensor_) + ": ") +
              "JSON nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels exceeds the limit";
      return false;
    }
    return true;
  }

  int depth_ = 0;
  size_t tensors_ = 0;
  std::vector<std::unordered_set<std::string>> open_objects_;
  std::string tensor_;  // the current top-level key, for naming where a nested duplicate is
};

Result<Shape> parse_shape(const json& value, const std::string& where) {
  if (!value.is_array()) return Error(where + "shape " + brief(value) + " is not an array");
  Shape shape;
  shape.reserve(value.size());
  for (const json& entry : value) {
    if (entry.is_number_unsigned()) {
      const auto dim = entry.get<uint64_t>();
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error(where + "shape " + brief(value) + " has entry " + std::to_string(dim) + " above 2^63-1");
      }
      shape.push_back(static_cast<int64_t>(dim));
    } else if (entry.is_number_integer()) {
      return Error(where + "shape " + brief(value) + " has a negative entry " + brief(entry));
    } else {
      return Error(where + "shape " + brief(value) + " has a non-integer entry " + brief(entry));
    }
  }
  return shape;
}

// numel x element size in bytes, or nullopt when it does not fit: the one checked size product of
// the library (checked_nbytes, issue 13 W2), so a zero dimension after huge ones is handled alike.
std::optional<uint64_t> byte_size(const Shape& shape, DType dtype) {
  const std::optional<int64_t> bytes = checked_nbytes(shape, dtype);
  if (!bytes) return std::nullopt;
  return static_cast<uint64_t>(*bytes);
}

std::string offsets_str(uint64_t begin, uint64_t end) {
  std::string out(1, '[');  // piecewise: `"[" + std::string&&` trips GCC 12's -Wrestrict
  out += std::to_string(begin);
  out += ", ";
  out += std::to_string(end);
  out += ']';
  return out;
}

Result<TensorInfo> parse_entry(const std::string& name, const json& entry, uint64_t data_size,
                               const std::string& prefix) {
  const std::string where = prefix + "tensor " + quote_name(name) + ": ";
  if (!entry.is_object()) return Error(where + "entry " + brief(entry) + " is not an object");
  // Fields other than these three are ignored, as the reference implementation does.
  const auto dtype_it = entry.find("dtype");
  const auto shape_it = entry.find("shape");
  const auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end()) return Error(where + "missing \"dtype\"");
  if (shape_it == entry.end()) return Error(where + "missing \"shape\"");
  if (offsets_it == entry.end()) return Error(where + "missing \"data_offsets\"");

  TensorInfo info;
  info.name = name;
  if (!dtype_it->is_string()) return Error(where + "dtype " + brief(*dtype_it) + " is not a string");
  const auto dtype = dtype_from_name(dtype_it->get_ref<const std::string&>());
  if (!dtype.ok()) return Error(where + "unknown dtype " + brief(*dtype_it));
  info.dtype = *dtype;

  auto shape = parse_shape(*shape_it, where);
  if (!shape.ok()) return shape.error();
  info.shape = std::move(shape.value());
  const auto bytes = byte_size(info.shape, info.dtype);
  if (!bytes) {
    return Error(where + std::string(dtype_name(info.dtype)) + " " + brief(*shape_it) +
                 " is too large: its byte size overflows 64 bits");
  }

  const json& offsets = *offsets_it;
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return Error(where + "data_offsets " + brief(offsets) + " is not a pair of non-negative integers");
  }
  info.begin = offsets[0].get<uint64_t>();
  info.end = offsets[1].get<uint64_t>();
  const std::string range = "data_offsets " + offsets_str(info.begin, info.end);
  if (info.begin > info.end) return Error(where + range + " begin after end");
  if (info.end > data_size) {
    return Error(where + range + " end beyond the data section of " + std::to_string(data_size) + " bytes");
  }
  if (info.end - info.begin != *bytes) {
    return Error(where + range + " hold " + std::to_string(info.end - info.begin) + " bytes but " +
                 std::string(dtype_name(info.dtype)) + " " + brief(*shape_it) + " needs " +
                 std::to_string(*bytes));
  }
  return info;
}

Result<Metadata> parse_metadata(const json& value, const std::string& prefix) {
  if (!value.is_object()) return Error(prefix + "__metadata__ " + brief(value) + " is not an object");
  Metadata metadata;
  for (const auto& [key, entry] : value.items()) {
    if (!entry.is_string()) {
      return Error(prefix + "__metadata__: value of " + quote_name(key) + " is " + brief(entry) +
                   ", not a string");
    }
    metadata.emplace(key, entry.get<std::string>());
  }
  return metadata;
}

// The tensors, sorted by offset, must tile [0, data_size) exactly: a gap is data nobody owns
// (the reference implementation rejects it as an incomplete index) and an overlap aliases two
// tensors.
Status check_coverage(const std::vector<TensorInfo>& tensors, uint64_t data_size, const std::string& prefix) {
  uint64_t covered = 0;
  const TensorInfo* last = nullptr;  // the tensor that ends at `covered`
  for (const TensorInfo& t : tensors) {
    // Built only on failure: this loop runs once per tensor of every file opened.
    const auto where = [&] { return prefix + "tensor " + quote_name(t.name) + ": data_offsets " + offsets_str(t.begin, t.end); };
    if (t.begin < covered) {
      return Error(where() + " overlap tensor " + quote_name(last->name) + " " + offsets_str(last->begin, last->end));
    }
    if (t.begin > covered) {
      return Error(where() + " leave data bytes [" + std::to_string(covered) + ", " + std::to_string(t.begin) +
                   ") unindexed" + (last ? " after tensor " + quote_name(last->name) : std::string()));
    }
    if (t.end > covered || last == nullptr) {
      covered = t.end;
      last = &t;
    }
  }
  if (covered != data_size) {
    if (last == nullptr) {
      return Error(prefix + "no tensors, but the data section holds " + std::to_string(data_size) + " bytes");
    }
    return Error(prefix + "data bytes [" + std::to_string(covered) + ", " + std::to_string(data_size) +
                 ") after tensor " + quote_name(last->name) + " are not indexed by any tensor");
  }
  return ok_status();
}

}  // namespace

Result<ParsedHeader> parse_safetensors_header(std::string_view path, const std::byte* bytes, size_t size) {
  const std::string prefix = std::string(path) + ": ";
  if (size < 8) {
    return Error(prefix + "file of " + std::to_string(size) +
                 " bytes is shorter than the 8-byte header length prefix");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | static_cast<uint8_t>(bytes[i]);  // little-endian
  if (header_len > kMaxHeaderBytes) {
    return Error(prefix + "header length " + std::to_string(header_len) + " exceeds the limit of " +
                 std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (header_len > size - 8) {
    return Error(prefix + "header length " + std::to_string(header_len) + " exceeds the " +
                 std::to_string(size - 8) + " bytes after the length prefix (truncated file?)");
  }
  const auto* header = reinterpret_cast<const char*>(bytes + 8);
  const uint64_t data_size = size - 8 - header_len;

  KeyScanner keys;
  json root;
  try {
    if (!json::sax_parse(header, header + header_len, &keys)) {
      if (keys.limit) return Error(ErrorCode::Limit, *keys.limit).with_file(std::string(path));
      return Error(prefix + "header is not valid JSON: " + keys.syntax_error.value_or("parse failed"));
    }
    if (keys.duplicate) return Error(prefix + *keys.duplicate);
    root = json::parse(header, header + header_len);
  } catch (const json::exception& e) {
    return Error(prefix + "header is not valid JSON: " + one_line(e.what(), 240));
  } catch (const std::exception& e) {
    return Error(prefix + "cannot parse header: " + one_line(e.what(), 240));
  }
  if (!root.is_object()) return Error(prefix + "header is " + brief(root) + ", not a JSON object");

  ParsedHeader parsed;
  parsed.data_start = 8 + header_len;
  parsed.tensors.reserve(root.size());
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      auto metadata = parse_metadata(entry, prefix);
      if (!metadata.ok()) return metadata.error();
      parsed.metadata = std::move(metadata.value());
      continue;
    }
    auto info = parse_entry(name, entry, data_size, prefix);
    if (!info.ok()) return info.error();
    parsed.tensors.push_back(std::move(info.value()));
  }
  // Ties (empty tensors at one offset) keep header order, so a file written in a given order
  // reads back in that order.
  // Sort keys computed once: hashing names inside the comparator dominated for 100k+ tensors.
  std::vector<std::tuple<uint64_t, uint64_t, size_t, size_t>> order;  // begin, end, header position, index
  order.reserve(parsed.tensors.size());
  for (size_t i = 0; i < parsed.tensors.size(); ++i) {
    const TensorInfo& t = parsed.tensors[i];
    order.emplace_back(t.begin, t.end, keys.position.at(t.name), i);
  }
  std::sort(order.begin(), order.end());
  std::vector<TensorInfo> sorted;
  sorted.reserve(order.size());
  for (const auto& key : order) sorted.push_back(std::move(parsed.tensors[std::get<3>(key)]));
  parsed.tensors = std::move(sorted);
  NMKIT_TRY(check_coverage(parsed.tensors, data_size, prefix));
  return parsed;
}

}  // namespace nmkit::io
