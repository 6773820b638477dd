#include "io/gguf_parse.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>

#include "io/text.h"

namespace nmkit::io {
namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
// Smallest encodings, used to bound counts by the bytes left before reserving anything: a key-value
// is at least a key length (8), a type (4) and a one-byte value; a tensor info at least a name
// length (8), n_dims (4), one ne (8), a type (4) and an offset (8).
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

// Fixed payload size of a scalar value type; 0 for string and array.
uint64_t scalar_bytes(GgufType type) {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    default: return 0;
  }
}

// The smallest encoding of one array element of `type` (string: its length; array: its header).
uint64_t min_element_bytes(GgufType type) {
  if (type == GgufType::String) return 8;
  if (type == GgufType::Array) return 4 + 8;
  return scalar_bytes(type);
}

// Bounds-checked little-endian reading; each failure is an Error naming the field being read.
class Reader {
 public:
  Reader(std::string_view path, const std::byte* bytes, size_t size)
      : prefix_(std::string(path) + ": "), bytes_(bytes), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  const std::string& prefix() const { return prefix_; }

  Error truncated(const std::string& what, uint64_t need) const {
    return Error(prefix_ + "truncated: " + what + " needs " + std::to_string(need) + " bytes at offset " +
                 std::to_string(pos_) + ", the file has " + std::to_string(left()) + " left");
  }

  template <class T>
  Result<T> scalar(const std::string& what) {
    if (left() < sizeof(T)) return truncated(what, sizeof(T));
    T value;
    std::memcpy(&value, bytes_ + pos_, sizeof(T));  // x86-64 and aarch64 are little-endian, as GGUF
    pos_ += sizeof(T);
    return value;
  }

  Result<std::string> string(const std::string& what) {
    auto length = scalar<uint64_t>(what + " length");
    if (!length.ok()) return length.error();
    if (*length > left()) {
      return Error(prefix_ + what + ": length " + std::to_string(*length) + " at offset " +
                   std::to_string(pos_ - 8) + " runs past the end of the file (" + std::to_string(left()) +
                   " bytes left)");
    }
    std::string text(reinterpret_cast<const char*>(bytes_ + pos_), static_cast<size_t>(*length));
    pos_ += *length;
    return text;
  }

 private:
  std::string prefix_;
  const std::byte* bytes_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

Result<GgufType> value_type(Reader& in, const std::string& what) {
  auto number = in.scalar<uint32_t>(what + " type");
  if (!number.ok()) return number.error();
  if (*number > static_cast<uint32_t>(GgufType::F64)) {
    return Error(in.prefix() + what + ": unknown value type " + std::to_string(*number));
  }
  return static_cast<GgufType>(*number);
}

Status read_value(Reader& in, GgufType type, GgufValue& out, const std::string& what, int depth);

Status read_array(Reader& in, GgufValue& out, const std::string& what, int depth) {
  if (depth >= kGgufMaxArrayDepth) {
    return Error(in.prefix() + what + ": arrays nested deeper than " + std::to_string(kGgufMaxArrayDepth));
  }
  auto element_type = value_type(in, what + " element");
  if (!element_type.ok()) return element_type.error();
  auto count = in.scalar<uint64_t>(what + " count");
  if (!count.ok()) return count.error();
  const uint64_t min_bytes = min_element_bytes(*element_type);
  if (*count > in.left() / min_bytes) {
    return Error(in.prefix() + what + ": array count " + std::to_string(*count) + " of " +
                 std::string(gguf_type_name(*element_type)) + " needs at least " +
                 std::to_string(min_bytes) + " bytes each, the file has " + std::to_string(in.left()) +
                 " left at offset " + std::to_string(in.pos()));
  }
  out.element_type = *element_type;
  out.elements.resize(static_cast<size_t>(*count));
  for (uint64_t i = 0; i < *count; ++i) {
    out.elements[i].type = *element_type;
    // The element's name is built only on failure: a 49152-token vocabulary must not build 49152
    // strings.
    Status status = read_value(in, *element_type, out.elements[i], what, depth + 1);
    if (!status.ok()) {
      const std::string& message = status.error().message();
      const std::string head = in.prefix() + what;
      // Re-anchor the message at this element: "PATH: key 'K'[i]: ..."
      if (message.rfind(head, 0) == 0) {
        return Error(head + "[" + std::to_string(i) + "]" + message.substr(head.size()));
      }
      return status.error();
    }
  }
  return ok_status();
}

Status read_value(Reader& in, GgufType type, GgufValue& out, const std::string& what, int depth) {
  out.type = type;
  switch (type) {
    case GgufType::U8: { auto v = in.scalar<uint8_t>(what); if (!v.ok()) return v.error(); out.integer = *v; break; }
    case GgufType::U16: { auto v = in.scalar<uint16_t>(what); if (!v.ok()) return v.error(); out.integer = *v; break; }
    case GgufType::U32: { auto v = in.scalar<uint32_t>(what); if (!v.ok()) return v.error(); out.integer = *v; break; }
    case GgufType::U64: { auto v = in.scalar<uint64_t>(what); if (!v.ok()) return v.error(); out.integer = *v; break; }
    case GgufType::I8: { auto v = in.scalar<int8_t>(what); if (!v.ok()) return v.error(); out.integer = static_cast<uint64_t>(int64_t{*v}); break; }
    case GgufType::I16: { auto v = in.scalar<int16_t>(what); if (!v.ok()) return v.error(); out.integer = static_cast<uint64_t>(int64_t{*v}); break; }
    case GgufType::I32: { auto v = in.scalar<int32_t>(what); if (!v.ok()) return v.error(); out.integer = static_cast<uint64_t>(int64_t{*v}); break; }
    case GgufType::I64: { auto v = in.scalar<int64_t>(what); if (!v.ok()) return v.error(); out.integer = static_cast<uint64_t>(*v); break; }
    case GgufType::F32: { auto v = in.scalar<float>(what); if (!v.ok()) return v.error(); out.real = *v; break; }
    case GgufType::F64: { auto v = in.scalar<double>(what); if (!v.ok()) return v.error(); out.real = *v; break; }
    case GgufType::Bool: {
      auto v = in.scalar<uint8_t>(what);
      if (!v.ok()) return v.error();
      if (*v > 1) return Error(in.prefix() + what + ": bool value " + std::to_string(*v) + " is neither 0 nor 1");
      out.integer = *v;
      break;
    }
    case GgufType::String: {
      auto v = in.string(what);
      if (!v.ok()) return v.error();
      out.string = std::move(*v);
      break;
    }
    case GgufType::Array:
      return read_array(in, out, what, depth);
  }
  return ok_status();
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

Status read_tensor_info(Reader& in, size_t index, size_t count, GgufTensorInfo& t) {
  // "of COUNT": a header whose tensor count exceeds the infos the file holds reads padding and data
  // as infos, and the message should point at the count rather than at a garbage name.
  const std::string ordinal = "tensor " + std::to_string(index + 1) + " of " + std::to_string(count);
  auto name = in.string(ordinal + " name");
  if (!name.ok()) return name.error();
  t.name = std::move(*name);
  if (t.name.empty()) {
    return Error(in.prefix() + ordinal + " (the header's tensor count): empty name; the count exceeds the "
                 "tensor infos the file holds, or the file is corrupt");
  }
  const std::string where = "tensor " + quote_name(t.name) + " (" + std::to_string(index + 1) + " of " +
                            std::to_string(count) + ")";
  auto n_dims = in.scalar<uint32_t>(where + " n_dims");
  if (!n_dims.ok()) return n_dims.error();
  if (*n_dims < 1 || *n_dims > 4) {
    return Error(in.prefix() + where + ": n_dims " + std::to_string(*n_dims) + " is not in 1..4");
  }
  for (uint32_t d = 0; d < *n_dims; ++d) {
    auto ne = in.scalar<uint64_t>(where + " ne[" + std::to_string(d) + "]");
    if (!ne.ok()) return ne.error();
    if (*ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error(in.prefix() + where + ": ne[" + std::to_string(d) + "] " + std::to_string(*ne) +
                   " is negative as int64");
    }
    t.ne.push_back(static_cast<int64_t>(*ne));
  }
  auto type = in.scalar<uint32_t>(where + " type");
  if (!type.ok()) return type.error();
  const auto ggml = ggml_type_from_number(*type);
  if (!ggml) return Error(in.prefix() + where + ": unknown ggml type " + std::to_string(*type));
  t.type = *ggml;
  auto offset = in.scalar<uint64_t>(where + " offset");
  if (!offset.ok()) return offset.error();
  t.offset = *offset;

  std::string ne_text = "(";
  for (size_t d = 0; d < t.ne.size(); ++d) ne_text += (d ? ", " : "") + std::to_string(t.ne[d]);
  ne_text += ")";
  uint64_t numel = 1;
  for (const int64_t d : t.ne) {
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error(in.prefix() + where + ": ne " + ne_text + " overflows 64-bit element counts");
    }
  }
  const uint64_t block = ggml_block_elements(t.type);
  if (static_cast<uint64_t>(t.ne[0]) % block != 0) {
    return Error(in.prefix() + where + ": ne[0] " + std::to_string(t.ne[0]) + " is not a multiple of " +
                 std::string(ggml_type_name(t.type)) + "'s block of " + std::to_string(block));
  }
  if (__builtin_mul_overflow(numel / block, uint64_t{ggml_block_bytes(t.type)}, &t.nbytes)) {
    return Error(in.prefix() + where + ": ne " + ne_text + " overflows 64-bit byte counts");
  }
  return ok_status();
}

}  // namespace

bool has_gguf_magic(const std::byte* bytes, size_t size) {
  return size >= 4 && std::memcmp(bytes, kMagic, 4) == 0;
}

Result<ParsedGguf> parse_gguf(std::string_view path, const std::byte* bytes, size_t size) {
  Reader in(path, bytes, size);
  const std::string& prefix = in.prefix();
  if (size < 4 || !has_gguf_magic(bytes, size)) return Error(prefix + "not a GGUF file (no 'GGUF' magic)");
  (void)in.scalar<uint32_t>("magic");
  ParsedGguf out;
  auto version = in.scalar<uint32_t>("the version");
  if (!version.ok()) return version.error();
  if (*version != 2 && *version != 3) {
    // A big-endian file's version reads byte-swapped (3 as 0x03000000).
    const bool swapped = *version == 0x02000000u || *version == 0x03000000u;
    return Error(prefix + "GGUF version " + std::to_string(*version) +
                 (swapped ? " (a big-endian file, which nmkit does not read)" : " is not supported (2 or 3)"));
  }
  out.version = *version;
  auto n_tensors = in.scalar<uint64_t>("the tensor count");
  if (!n_tensors.ok()) return n_tensors.error();
  auto n_kv = in.scalar<uint64_t>("the key-value count");
  if (!n_kv.ok()) return n_kv.error();
  if (*n_kv > in.left() / kMinKeyValueBytes) {
    return Error(prefix + "truncated or corrupt: key-value count " + std::to_string(*n_kv) + " needs at least " +
                 std::to_string(kMinKeyValueBytes) + " bytes each, the file has " + std::to_string(in.left()) + " left");
  }
  if (*n_tensors > in.left() / kMinTensorInfoBytes) {
    return Error(prefix + "truncated or corrupt: tensor count " + std::to_string(*n_tensors) + " needs at least " +
                 std::to_string(kMinTensorInfoBytes) + " bytes each, the file has " + std::to_string(in.left()) + " left");
  }

  out.metadata.resize(static_cast<size_t>(*n_kv));
  std::unordered_set<std::string_view> keys;
  keys.reserve(static_cast<size_t>(*n_kv));
  for (size_t i = 0; i < out.metadata.size(); ++i) {
    GgufKeyValue& kv = out.metadata[i];
    auto key = in.string("key " + std::to_string(i));
    if (!key.ok()) return key.error();
    kv.key = std::move(*key);
    const std::string where = "key " + quote_name(kv.key);
    auto type = value_type(in, where);
    if (!type.ok()) return type.error();
    NMKIT_TRY(read_value(in, *type, kv.value, where, 0));
    if (!keys.insert(kv.key).second) return Error(prefix + where + ": listed twice");
    if (kv.key == "general.alignment") {
      if (kv.value.type != GgufType::U32) {
        return Error(prefix + where + ": is a " + std::string(gguf_type_name(kv.value.type)) + ", expected u32");
      }
      if (!is_power_of_two(kv.value.integer)) {
        return Error(prefix + where + ": alignment " + std::to_string(kv.value.integer) + " is not a power of two");
      }
      out.alignment = static_cast<uint32_t>(kv.value.integer);
    }
  }

  out.tensors.resize(static_cast<size_t>(*n_tensors));
  std::unordered_set<std::string_view> names;
  names.reserve(out.tensors.size());
  for (size_t i = 0; i < out.tensors.size(); ++i) {
    NMKIT_TRY(read_tensor_info(in, i, out.tensors.size(), out.tensors[i]));
    if (!names.insert(out.tensors[i].name).second) {
      return Error(prefix + "tensor " + quote_name(out.tensors[i].name) + ": listed twice");
    }
  }

  // Data starts at the end of the infos rounded up to the alignment (a power of two up to 2^31).
  const uint64_t align = out.alignment;
  out.data_start = (in.pos() + align - 1) / align * align;
  if (out.data_start > size) {
    if (!out.tensors.empty()) {
      return Error(prefix + "truncated: the data section starts at offset " + std::to_string(out.data_start) +
                   " (tensor infos end at " + std::to_string(in.pos()) + ", alignment " + std::to_string(align) +
                   "), the file has " + std::to_string(size) + " bytes");
    }
    out.data_start = size;
  }
  const uint64_t data_size = size - out.data_start;
  for (const GgufTensorInfo& t : out.tensors) {
    const std::string where = prefix + "tensor " + quote_name(t.name) + ": ";
    if (t.offset % align != 0) {
      return Error(where + "offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                   std::to_string(align));
    }
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return Error(where + "data [" + std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) +
                   ") runs past the data section of " + std::to_string(data_size) + " bytes");
    }
  }
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(out.tensors.size());
  for (const GgufTensorInfo& t : out.tensors) {
    if (t.nbytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& a = *by_offset[i - 1];
    const GgufTensorInfo& b = *by_offset[i];
    if (a.offset + a.nbytes > b.offset) {
      return Error(prefix + "tensor " + quote_name(b.name) + ": data at offset " + std::to_string(b.offset) +
                   " overlaps tensor " + quote_name(a.name) + " [" + std::to_string(a.offset) + ", " +
                   std::to_string(a.offset + a.nbytes) + ")");
    }
  }
  return out;
}

}  // namespace nmkit::io
