// GgufFile: a memory-mapped GGUF file validated by parse_gguf, with typed metadata getters and
// multithreaded dequantization.
#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>

#include "io/gguf_parse.h"
#include "io/mapped_file.h"
#include "io/text.h"
#include "nmkit/gguf.h"
#include "nmkit/threads.h"

namespace nmkit {

struct GgufFile::Impl {
  std::string path;
  io::MappedFile file;
  io::ParsedGguf parsed;
  std::unordered_map<std::string_view, size_t> key_index;
  std::unordered_map<std::string_view, size_t> tensor_index;
};

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

Result<GgufFile> GgufFile::open(const std::string& path) {
  auto file = io::MappedFile::open_read(path);
  if (!file.ok()) return file.error();
  auto parsed = io::parse_gguf(path, file->data(), file->size());
  if (!parsed.ok()) return parsed.error().classified(ErrorCode::InvalidFile);
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->file = std::move(*file);
  impl->parsed = std::move(*parsed);
  // Keys into the strings the parsed vectors own: they never move again.
  for (size_t i = 0; i < impl->parsed.metadata.size(); ++i) impl->key_index.emplace(impl->parsed.metadata[i].key, i);
  for (size_t i = 0; i < impl->parsed.tensors.size(); ++i) impl->tensor_index.emplace(impl->parsed.tensors[i].name, i);
  return GgufFile(std::move(impl));
}

const std::string& GgufFile::path() const { return impl_->path; }
uint32_t GgufFile::version() const { return impl_->parsed.version; }
uint32_t GgufFile::alignment() const { return impl_->parsed.alignment; }
uint64_t GgufFile::data_offset() const { return impl_->parsed.data_start; }
const std::vector<GgufKeyValue>& GgufFile::metadata() const { return impl_->parsed.metadata; }
const std::vector<GgufTensorInfo>& GgufFile::tensors() const { return impl_->parsed.tensors; }

const GgufValue* GgufFile::find_key(std::string_view key) const {
  const auto it = impl_->key_index.find(key);
  return it == impl_->key_index.end() ? nullptr : &impl_->parsed.metadata[it->second].value;
}

const GgufTensorInfo* GgufFile::find(std::string_view name) const {
  const auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->parsed.tensors[it->second];
}

namespace {

std::string type_text(const GgufValue& v) {
  if (v.type != GgufType::Array) return std::string(gguf_type_name(v.type));
  return "array of " + std::string(gguf_type_name(v.element_type));
}

bool is_integer_type(GgufType type) {
  GgufValue probe;
  probe.type = type;
  return probe.is_integer();
}

}  // namespace

// Looks the key up; a missing key or a value whose type `accept` refuses is an Error naming both.
#define NMKIT_GGUF_LOOKUP(value, key, accept, expected)                                              \
  const GgufValue* value = find_key(key);                                                          \
  if (value == nullptr) return Error(path() + ": no metadata key " + io::quote_name(key));         \
  if (!(accept)) {                                                                                 \
    return Error(path() + ": metadata key " + io::quote_name(key) + " is " + type_text(*value) +   \
                 ", expected " + (expected));                                                      \
  }

Result<std::string> GgufFile::get_string(std::string_view key) const {
  NMKIT_GGUF_LOOKUP(v, key, v->type == GgufType::String, "a string");
  return v->string;
}

Result<uint64_t> GgufFile::get_uint(std::string_view key) const {
  NMKIT_GGUF_LOOKUP(v, key, v->is_integer(), "an integer");
  const auto value = v->as_uint();
  if (!value) {
    return Error(path() + ": metadata key " + io::quote_name(key) + " is " +
                 std::to_string(static_cast<int64_t>(v->integer)) + ", expected a non-negative integer");
  }
  return *value;
}

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  NMKIT_GGUF_LOOKUP(v, key, v->is_integer(), "an integer");
  const auto value = v->as_int();
  if (!value) {
    return Error(path() + ": metadata key " + io::quote_name(key) + " is " + std::to_string(v->integer) +
                 ", which does not fit int64");
  }
  return *value;
}

Result<double> GgufFile::get_float(std::string_view key) const {
  NMKIT_GGUF_LOOKUP(v, key, v->is_float(), "f32 or f64");
  return v->real;
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  NMKIT_GGUF_LOOKUP(v, key, v->type == GgufType::Bool, "a bool");
  return v->integer != 0;
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  NMKIT_GGUF_LOOKUP(v, key, v->type == GgufType::Array && v->element_type == GgufType::String,
                    "an array of string");
  std::vector<std::string> out;
  out.reserve(v->elements.size());
  for (const GgufValue& e : v->elements) out.push_back(e.string);
  return out;
}

Result<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  NMKIT_GGUF_LOOKUP(v, key,
                    v->type == GgufType::Array &&
                        (v->element_type == GgufType::F32 || v->element_type == GgufType::F64),
                    "an array of f32 or f64");
  std::vector<float> out;
  out.reserve(v->elements.size());
  for (const GgufValue& e : v->elements) out.push_back(static_cast<float>(e.real));
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  NMKIT_GGUF_LOOKUP(v, key, v->type == GgufType::Array && is_integer_type(v->element_type),
                    "an array of integers");
  std::vector<int64_t> out;
  out.reserve(v->elements.size());
  for (size_t i = 0; i < v->elements.size(); ++i) {
    const auto value = v->elements[i].as_int();
    if (!value) {
      return Error(path() + ": metadata key " + io::quote_name(key) + "[" + std::to_string(i) + "] is " +
                   std::to_string(v->elements[i].integer) + ", which does not fit int64");
    }
    out.push_back(*value);
  }
  return out;
}

#undef NMKIT_GGUF_LOOKUP

std::span<const std::byte> GgufFile::raw(const GgufTensorInfo& info) const {
  return {impl_->file.data() + impl_->parsed.data_start + info.offset, static_cast<size_t>(info.nbytes)};
}

Result<Tensor> GgufFile::dequantize(std::string_view name) const {
  const GgufTensorInfo* info = find(name);
  if (info == nullptr) return Error(path() + ": no tensor " + io::quote_name(name)).classified(ErrorCode::NotFound);
  return dequantize(*info);
}

Result<Tensor> GgufFile::dequantize(const GgufTensorInfo& info) const {
  if (!ggml_can_dequantize(info.type)) {
    return Error(path() + ": tensor " + io::quote_name(info.name) + ": ggml type " +
                 std::string(ggml_type_name(info.type)) +
                 " cannot be dequantized (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)");
  }
  Tensor out = Tensor::empty(DType::F32, info.shape());
  const std::byte* src = raw(info).data();
  float* dst = out.as<float>();
  const int64_t block = ggml_block_elements(info.type);
  const int64_t block_bytes = ggml_block_bytes(info.type);
  const int64_t n_blocks = info.numel() / block;
  // Chunks of 16k elements: large enough that a thread's share is far above the pool's wake-up cost
  // (microseconds), small enough that a 576 x 49152 embedding spreads over every core.
  const int64_t grain = std::max<int64_t>(1, 16384 / block);
  parallel_for(n_blocks, grain, [&](int64_t begin, int64_t end) {
    // Cannot fail: the type was checked above and a range of whole blocks is passed.
    const Status status = dequantize_ggml(info.type, src + begin * block_bytes, dst + begin * block, (end - begin) * block);
    NMKIT_ASSERT(status.ok());
  });
  return out;
}

}  // namespace nmkit
