// Atomic GGUF writing (version 3, docs/design.md section 11.1): the header is serialized in memory,
// every tensor is produced by its fill directly in a mapping of a temporary file, and the file is
// renamed onto the destination only when all succeeded (PendingFile, include/nmkit/files.h, as for
// write_safetensors).
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "io/mapped_file.h"
#include "io/gguf_parse.h"
#include "io/text.h"
#include "nmkit/files.h"
#include "nmkit/gguf.h"

namespace nmkit {
namespace {

// ggml keeps tensor names in a 64-byte field with its terminating zero (GGML_MAX_NAME): llama.cpp
// refuses longer names, so the writer does too.
constexpr size_t kMaxTensorNameBytes = 63;

std::optional<GgmlType> ggml_type_of(DType dtype) {
  switch (dtype) {
    case DType::F32: return GgmlType::F32;
    case DType::F16: return GgmlType::F16;
    case DType::BF16: return GgmlType::BF16;
    case DType::F64: return GgmlType::F64;
    case DType::I8: return GgmlType::I8;
    case DType::I16: return GgmlType::I16;
    case DType::I32: return GgmlType::I32;
    case DType::I64: return GgmlType::I64;
    default: return std::nullopt;
  }
}

template <class T>
void put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian hosts only, as GGUF
  out.append(bytes, sizeof(T));
}

void put_string(std::string& out, std::string_view text) {
  put<uint64_t>(out, text.size());
  out.append(text);
}

Status put_value(std::string& out, const GgufValue& v, const std::string& where, int depth) {
  switch (v.type) {
    case GgufType::U8: put<uint8_t>(out, static_cast<uint8_t>(v.integer)); break;
    case GgufType::I8: put<int8_t>(out, static_cast<int8_t>(v.integer)); break;
    case GgufType::U16: put<uint16_t>(out, static_cast<uint16_t>(v.integer)); break;
    case GgufType::I16: put<int16_t>(out, static_cast<int16_t>(v.integer)); break;
    case GgufType::U32: put<uint32_t>(out, static_cast<uint32_t>(v.integer)); break;
    case GgufType::I32: put<int32_t>(out, static_cast<int32_t>(v.integer)); break;
    case GgufType::U64: put<uint64_t>(out, v.integer); break;
    case GgufType::I64: put<int64_t>(out, static_cast<int64_t>(v.integer)); break;
    case GgufType::F32: put<float>(out, static_cast<float>(v.real)); break;
    case GgufType::F64: put<double>(out, v.real); break;
    case GgufType::Bool: put<uint8_t>(out, v.integer != 0 ? 1 : 0); break;
    case GgufType::String: put_string(out, v.string); break;
    case GgufType::Array:
      if (depth >= io::kGgufMaxArrayDepth) {
        return Error(where + ": arrays nested deeper than " + std::to_string(io::kGgufMaxArrayDepth));
      }
      put<uint32_t>(out, static_cast<uint32_t>(v.element_type));
      put<uint64_t>(out, v.elements.size());
      for (size_t i = 0; i < v.elements.size(); ++i) {
        if (v.elements[i].type != v.element_type) {
          return Error(where + "[" + std::to_string(i) + "]: a " + std::string(gguf_type_name(v.elements[i].type)) +
                       " in an array of " + std::string(gguf_type_name(v.element_type)));
        }
        NMKIT_TRY(put_value(out, v.elements[i], where, depth + 1));
      }
      break;
    default:
      return Error(where + ": unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
  }
  return ok_status();
}

struct GgufLayout {
  std::string header;            // everything before the data section, padded to the alignment
  std::vector<uint64_t> offsets;  // of each tensor in the data section
  uint64_t data_size = 0;         // padded
};

Result<GgufLayout> plan_gguf(const std::string& path, const std::vector<GgufKeyValue>& metadata,
                    const std::vector<GgufOutputTensor>& tensors, const GgufWriteOptions& options) {
  const std::string prefix = path + ": ";
  const uint64_t align = options.alignment;
  if (align == 0 || (align & (align - 1)) != 0) {
    return Error(prefix + "alignment " + std::to_string(align) + " is not a power of two");
  }
  GgufLayout layout;
  std::string& out = layout.header;
  out.append("GGUF", 4);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors.size());
  bool alignment_written = false;
  const bool need_alignment = align != io::kGgufDefaultAlignment;
  uint64_t n_kv = 0;
  const size_t count_at = out.size();
  put<uint64_t>(out, 0);  // key-value count, patched below
  std::unordered_set<std::string_view> keys;
  for (const GgufKeyValue& kv : metadata) {
    const std::string where = prefix + "key " + io::quote_name(kv.key);
    if (!keys.insert(kv.key).second) return Error(where + ": listed twice");
    put_string(out, kv.key);
    if (kv.key == "general.alignment") {
      put<uint32_t>(out, static_cast<uint32_t>(GgufType::U32));
      put<uint32_t>(out, static_cast<uint32_t>(align));
      alignment_written = true;
    } else {
      put<uint32_t>(out, static_cast<uint32_t>(kv.value.type));
      NMKIT_TRY(put_value(out, kv.value, where, 0));
    }
    ++n_kv;
  }
  if (need_alignment && !alignment_written) {
    put_string(out, "general.alignment");
    put<uint32_t>(out, static_cast<uint32_t>(GgufType::U32));
    put<uint32_t>(out, static_cast<uint32_t>(align));
    ++n_kv;
  }
  std::memcpy(out.data() + count_at, &n_kv, 8);

  std::unordered_set<std::string_view> names;
  uint64_t offset = 0;
  for (const GgufOutputTensor& t : tensors) {
    const std::string where = prefix + "tensor " + io::quote_name(t.name) + ": ";
    if (t.name.empty()) return Error(prefix + "a tensor has an empty name");
    if (t.name.size() > kMaxTensorNameBytes) {
      return Error(where + "name of " + std::to_string(t.name.size()) + " bytes is longer than ggml's " +
                   std::to_string(kMaxTensorNameBytes));
    }
    if (!names.insert(t.name).second) return Error(where + "listed twice");
    if (!ggml_type_from_number(static_cast<uint32_t>(t.type))) {
      return Error(where + "unknown ggml type " + std::to_string(static_cast<uint32_t>(t.type)));
    }
    if (t.shape.empty() || t.shape.size() > 4) {
      return Error(where + "shape " + shape_str(t.shape) + " has " + std::to_string(t.shape.size()) +
                   " dimensions; GGUF holds 1 to 4");
    }
    const uint64_t block = ggml_block_elements(t.type);
    if (t.shape.back() < 0 || static_cast<uint64_t>(t.shape.back()) % block != 0) {
      return Error(where + "shape " + shape_str(t.shape) + ": the last dimension is not a multiple of " +
                   std::string(ggml_type_name(t.type)) + "'s block of " + std::to_string(block));
    }
    uint64_t bytes = ggml_block_bytes(t.type);
    for (size_t d = 0; d < t.shape.size(); ++d) {
      const int64_t dim = t.shape[d];
      if (dim < 0) return Error(where + "shape " + shape_str(t.shape) + " has a negative entry " + std::to_string(dim));
      const uint64_t factor = d + 1 == t.shape.size() ? static_cast<uint64_t>(dim) / block : static_cast<uint64_t>(dim);
      if (__builtin_mul_overflow(bytes, factor, &bytes)) {
        return Error(where + "shape " + shape_str(t.shape) + " overflows 64-bit byte counts");
      }
    }
    if (!t.fill) return Error(where + "no fill function");
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) put<uint64_t>(out, static_cast<uint64_t>(*d));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    layout.offsets.push_back(offset);
    // Every tensor's data is padded to the alignment, the last one included, as ggml's writer does
    // (llama.cpp's reader sums padded sizes).
    const uint64_t padded = (bytes + align - 1) / align * align;
    if (padded < bytes || __builtin_add_overflow(offset, padded, &offset)) {
      return Error(where + "shape " + shape_str(t.shape) + " overflows 64-bit byte counts");
    }
  }
  out.append((align - out.size() % align) % align, '\0');
  layout.data_size = offset;
  return layout;
}

}  // namespace

GgufOutputTensor GgufOutputTensor::copy_of(const GgufFile& file, const GgufTensorInfo& info) {
  GgufOutputTensor out;
  out.name = info.name;
  out.type = info.type;
  out.shape = info.shape();
  out.fill = [bytes = file.raw(info)](std::byte* dst) {
    if (!bytes.empty()) std::memcpy(dst, bytes.data(), bytes.size());
    return ok_status();
  };
  return out;
}

Result<GgufOutputTensor> GgufOutputTensor::from(const OutputTensor& tensor) {
  const auto type = ggml_type_of(tensor.dtype);
  if (!type) {
    return Error("tensor " + io::quote_name(tensor.name) + ": dtype " + std::string(dtype_name(tensor.dtype)) +
                 " has no ggml type");
  }
  return GgufOutputTensor{tensor.name, *type, tensor.shape, tensor.fill};
}

Status write_gguf(const std::string& path, const std::vector<GgufKeyValue>& metadata,
                  const std::vector<OutputTensor>& tensors, const GgufWriteOptions& options) {
  std::vector<GgufOutputTensor> typed;
  typed.reserve(tensors.size());
  for (const OutputTensor& t : tensors) {
    auto g = GgufOutputTensor::from(t);
    if (!g.ok()) return g.error().with_context(path + ": ");
    typed.push_back(std::move(*g));
  }
  return write_gguf(path, metadata, typed, options);
}

Status write_gguf(const std::string& path, const std::vector<GgufKeyValue>& metadata,
                  const std::vector<GgufOutputTensor>& tensors, const GgufWriteOptions& options) {
  auto layout = plan_gguf(path, metadata, tensors, options);
  if (!layout.ok()) return layout.error();
  const uint64_t header_size = layout->header.size();
  uint64_t total = 0;
  if (__builtin_add_overflow(header_size, layout->data_size, &total)) {
    return Error(path + ": the tensors overflow 64-bit file sizes");
  }
  auto pending = PendingFile::create(path, total);
  if (!pending.ok()) return pending.error();
  std::byte* out = pending->data();
  std::memcpy(out, layout->header.data(), header_size);
  // The padding between tensors stays zero: the reserved blocks of a new file read as zeros.
  std::byte* data = out + header_size;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufOutputTensor& t = tensors[i];
    // Callbacks are the caller's code: an exception must not skip the cleanup or leave the library
    // (docs/design.md section 10.1).
    try {
      if (options.on_tensor) {
        OutputTensor shown;
        shown.name = t.name;
        shown.shape = t.shape;
        shown.dtype = DType::U8;
        for (const DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::I16, DType::I32, DType::I64}) {
          if (ggml_type_of(d) == t.type) shown.dtype = d;
        }
        options.on_tensor(i, tensors.size(), shown);
      }
      NMKIT_TRY(t.fill(data + layout->offsets[i]));
      if (total > io::kPopulateLimit) {  // written: its pages leave the resident set (files.cc)
        const uint64_t end = i + 1 < tensors.size() ? layout->offsets[i + 1] : layout->data_size;
        io::release_pages(data + layout->offsets[i], end - layout->offsets[i]);
      }
    } catch (const std::bad_alloc&) {
      throw;  // out of memory is not the fill's error: the caller reports it; the temporary goes
    } catch (const std::exception& e) {
      return Error(path + ": tensor " + io::quote_name(t.name) + ": " + io::one_line(e.what(), 200));
    } catch (...) {
      return Error(path + ": tensor " + io::quote_name(t.name) + ": fill threw an unknown exception");
    }
  }
  return pending->commit();
}

}  // namespace nmkit
