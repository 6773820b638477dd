// Atomic safetensors writing: every tensor is produced directly in a memory mapping of a temporary
// file in the destination folder, which is renamed onto the destination only when all succeeded.

#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/mapped_file.h"
#include "io/safetensors_header.h"
#include "io/text.h"
#include "nmkit/files.h"
#include "nmkit/safetensors.h"

namespace nmkit {
namespace {

struct SafetensorsLayout {
  std::string header;              // JSON padded with spaces to a multiple of 8 bytes
  std::vector<uint64_t> begins;    // data offset of each tensor
  uint64_t data_size = 0;
};

// A JSON string literal; throws nlohmann's type_error for invalid UTF-8 (caught by plan_safetensors()).
void append_json_string(std::string& out, const std::string& text) {
  out += nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
}

// The header in the reference implementation's form: "__metadata__" first (only when non-empty),
// then each tensor as {"dtype", "shape", "data_offsets"} with contiguous offsets in the given order.
// Built as text: nlohmann's ordered_json inserts by linear search, quadratic in the tensor count.
Result<SafetensorsLayout> plan_safetensors(const std::string& path, const std::vector<OutputTensor>& tensors,
                                           const Metadata& metadata) {
  const std::string prefix = path + ": ";
  SafetensorsLayout layout;
  layout.begins.reserve(tensors.size());
  std::string& header = layout.header;
  header = "{";
  try {
    if (!metadata.empty()) {
      header += "\"__metadata__\":{";
      bool first = true;
      for (const auto& [key, value] : metadata) {
        if (!first) header += ',';
        first = false;
        append_json_string(header, key);
        header += ':';
        append_json_string(header, value);
      }
      header += '}';
    }
    std::unordered_set<std::string_view> names;
    uint64_t offset = 0;
    for (const OutputTensor& t : tensors) {
      const std::string where = prefix + "tensor " + io::quote_name(t.name) + ": ";
      // "" is a valid JSON key and readable (issue 13, M5: prune then blamed its output for an input's
      // name), so it is written too; only names the reader refuses are refused here.
      if (t.name.size() > io::kMaxNameBytes) {
        return Error(where + "name of " + std::to_string(t.name.size()) + " bytes exceeds the limit of " +
                     std::to_string(io::kMaxNameBytes) + " bytes readers accept");
      }
      if (t.name == "__metadata__") return Error(where + "the name is reserved for the metadata");
      if (!names.insert(t.name).second) return Error(where + "listed twice");
      for (const int64_t dim : t.shape) {
        if (dim < 0) return Error(where + "shape " + shape_str(t.shape) + " has a negative entry " + std::to_string(dim));
      }
      // The library's one checked size product (checked_nbytes, issue 13 W2).
      const std::optional<int64_t> bytes = checked_nbytes(t.shape, t.dtype);
      uint64_t end = 0;
      if (!bytes || __builtin_add_overflow(offset, static_cast<uint64_t>(*bytes), &end)) {
        return Error(where + "shape " + shape_str(t.shape) + " overflows 64-bit byte counts");
      }
      if (!t.fill) return Error(where + "no fill function");
      if (header.size() > 1) header += ',';
      append_json_string(header, t.name);
      header += ":{\"dtype\":\"";
      header += dtype_name(t.dtype);
      header += "\",\"shape\":[";
      for (size_t d = 0; d < t.shape.size(); ++d) {
        if (d > 0) header += ',';
        header += std::to_string(t.shape[d]);
      }
      header += "],\"data_offsets\":[";
      header += std::to_string(offset);
      header += ',';
      header += std::to_string(end);
      header += "]}";
      layout.begins.push_back(offset);
      offset = end;
      if (header.size() > io::kMaxHeaderBytes) break;  // reported below
    }
    layout.data_size = offset;
  } catch (const std::bad_alloc&) {
    throw;  // out of memory is not bad input: the caller reports it (issue 24, item 2)
  } catch (const std::exception& e) {
    return Error(prefix + "tensor names and metadata must be valid UTF-8: " + io::one_line(e.what(), 200));
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > io::kMaxHeaderBytes) {
    return Error(prefix + "header of more than " + std::to_string(io::kMaxHeaderBytes) +
                 " bytes exceeds the limit readers accept");
  }
  return layout;
}

}  // namespace

OutputTensor OutputTensor::copy_of(std::string name, const TensorView& view) {
  OutputTensor out;
  out.name = std::move(name);
  out.dtype = view.dtype;
  out.shape = view.shape;
  out.fill = [src = view.data, bytes = view.nbytes()](std::byte* dst) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return ok_status();
  };
  return out;
}

OutputTensor OutputTensor::owning(std::string name, Tensor tensor) {
  // std::function needs a copyable callable; the tensor is shared by the copies of this one.
  auto held = std::make_shared<Tensor>(std::move(tensor));
  OutputTensor out;
  out.name = std::move(name);
  out.dtype = held->dtype();
  out.shape = held->shape();
  out.fill = [held](std::byte* dst) {
    if (held->nbytes() > 0) std::memcpy(dst, held->data(), held->nbytes());
    return ok_status();
  };
  return out;
}

Result<PendingFile> prepare_safetensors(const std::string& path, const std::vector<OutputTensor>& tensors,
                                        const Metadata& metadata, const WriteOptions& options) {
  auto layout = plan_safetensors(path, tensors, metadata);
  if (!layout.ok()) return layout.error();
  const uint64_t header_len = layout->header.size();
  const uint64_t total = 8 + header_len + layout->data_size;

  auto pending = PendingFile::create(path, total);
  if (!pending.ok()) return pending.error();
  std::byte* out = pending->data();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(header_len >> (8 * i) & 0xFF);  // little-endian
  std::memcpy(out + 8, layout->header.data(), header_len);
  std::byte* data = out + 8 + header_len;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const OutputTensor& t = tensors[i];
    // Callbacks are the caller's code: an exception from one must not skip the cleanup or leave
    // the library (docs/design.md section 10.1).
    try {
      if (options.on_tensor) options.on_tensor(i, tensors.size(), t);
      NMKIT_TRY(t.fill(data + layout->begins[i]));
      if (total > io::kPopulateLimit) {  // written: its pages leave the resident set (files.cc)
        const uint64_t end = i + 1 < tensors.size() ? layout->begins[i + 1] : layout->data_size;
        io::release_pages(data + layout->begins[i], end - layout->begins[i]);
      }
    } catch (const std::bad_alloc&) {
      throw;  // out of memory is not the fill's error: the caller reports it; the temporary goes
    } catch (const std::exception& e) {
      return Error(path + ": tensor " + io::quote_name(t.name) + ": " + io::one_line(e.what(), 200));
    } catch (...) {
      return Error(path + ": tensor " + io::quote_name(t.name) + ": fill threw an unknown exception");
    }
  }
  NMKIT_TRY(pending->finish());
  return std::move(*pending);
}

Status write_safetensors(const std::string& path, const std::vector<OutputTensor>& tensors,
                         const Metadata& metadata, const WriteOptions& options) {
  auto pending = prepare_safetensors(path, tensors, metadata, options);
  if (!pending.ok()) return pending.error();
  return pending->commit();
}

}  // namespace nmkit
