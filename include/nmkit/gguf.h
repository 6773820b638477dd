// GGUF files (llama.cpp's model format, versions 2 and 3): memory-mapped, fully validated reading,
// dequantization to f32, and atomic writing. Format and rules: docs/design.md section 11.1.
// Layout: "GGUF", u32 version, u64 tensor count, u64 key-value count, the key-values (u64-length
// string key, u32 value type, payload), the tensor infos (name, u32 n_dims, u64 ne[n_dims], u32 ggml
// type, u64 offset), padding to `general.alignment` (default 32), then the data section; each tensor
// lies at data start + offset, offsets being multiples of the alignment. ne[0] is the contiguous
// dimension: nmkit's shape is ne reversed (a weight with ne = (K, rows) is [rows, K]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/safetensors.h"  // OutputTensor, WriteOptions: the writer takes the same tensors
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

// ggml's tensor types, with ggml's numbers (gaps are types ggml removed; a file using one is refused).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

// Known types only (others are refused when a file is opened): "Q4_K", "BF16", ...
std::string_view ggml_type_name(GgmlType type);
// Elements per block and bytes per block (1 and the element size for plain types); nullopt when the
// number is not a type this build knows.
std::optional<GgmlType> ggml_type_from_number(uint32_t number);
uint32_t ggml_block_elements(GgmlType type);
uint32_t ggml_block_bytes(GgmlType type);
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
bool ggml_can_dequantize(GgmlType type);

// Metadata value types, with GGUF's numbers.
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
std::string_view gguf_type_name(GgufType type);  // "u32", "string", "array", ...

// One metadata value. Scalars: integers in `integer` (signed ones sign-extended, so read them with
// as_int), floats in `real` (an f32 is exact in a double), bools in `integer` (0 or 1). Arrays keep
// their element type (arrays of arrays are allowed) and elements.
struct GgufValue {
  GgufType type = GgufType::U8;
  uint64_t integer = 0;
  double real = 0;
  std::string string;
  GgufType element_type = GgufType::U8;  // arrays only
  std::vector<GgufValue> elements;       // arrays only

  bool is_integer() const;  // u8..i64 (not bool)
  bool is_float() const;    // f32, f64
  // The value of an integer type when it fits the result type; nullopt otherwise.
  std::optional<int64_t> as_int() const;
  std::optional<uint64_t> as_uint() const;

  static GgufValue of_string(std::string text);
  static GgufValue of_uint32(uint32_t value);
  static GgufValue of_int32(int32_t value);
  static GgufValue of_uint64(uint64_t value);
  static GgufValue of_float32(float value);
  static GgufValue of_bool(bool value);
  static GgufValue of_array(GgufType element_type, std::vector<GgufValue> elements);
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] contiguous
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // into the data section, as in the file
  uint64_t nbytes = 0;  // bytes of its data

  Shape shape() const;  // ne reversed: nmkit's row-major shape
  int64_t numel() const;
};

// A read-only, memory-mapped GGUF file validated in full by open(), before any data is read: magic
// and version (2 or 3), counts bounded by the bytes left, every string and array length inside the
// file, all 13 value types and nested arrays (depth at most 8), no duplicate key or tensor names,
// `general.alignment` a u32 power of two, n_dims 1..4, non-negative ne whose element and byte counts
// fit 64 bits, ne[0] a multiple of the type's block, known ggml types (an unknown one is an Error
// naming the tensor and the number), offsets multiples of the alignment, every tensor inside the
// data section and no two overlapping. Errors are one line: "PATH: <where>: <what> <value>".
class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path);
  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& path() const;
  uint32_t version() const;
  uint32_t alignment() const;
  uint64_t data_offset() const;  // file offset of the data section

  const std::vector<GgufKeyValue>& metadata() const;  // in file order
  const GgufValue* find_key(std::string_view key) const;
  const std::vector<GgufTensorInfo>& tensors() const;  // in file order
  const GgufTensorInfo* find(std::string_view name) const;

  // Typed metadata. Errors: "PATH: no metadata key 'KEY'" or "PATH: metadata key 'KEY' is a TYPE,
  // expected ...". get_int/get_uint accept any integer type whose value fits; get_float f32 or f64;
  // get_float_array f32 or f64 elements (f64 rounded to f32); get_int_array any integer elements.
  Result<std::string> get_string(std::string_view key) const;
  Result<uint64_t> get_uint(std::string_view key) const;
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_float_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;

  // The tensor's bytes as stored (valid while this object lives).
  std::span<const std::byte> raw(const GgufTensorInfo& info) const;
  // The tensor as F32 with shape info.shape(), values bit for bit those of the PyPI gguf package's
  // gguf.quants.dequantize. Large tensors are dequantized on the thread pool. An Error names the
  // tensor and its type when the type cannot be dequantized.
  Result<Tensor> dequantize(const GgufTensorInfo& info) const;
  Result<Tensor> dequantize(std::string_view name) const;  // also an Error for an absent name

  struct Impl;  // opaque: defined in src/io

 private:
  explicit GgufFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Dequantizes `n_elements` (a multiple of the type's block) from `src` into `dst`, single-threaded:
// the kernel under GgufFile::dequantize, exposed for the model runtime and tests.
Status dequantize_ggml(GgmlType type, const std::byte* src, float* dst, int64_t n_elements);

struct GgufWriteOptions {
  uint32_t alignment = 32;  // written as general.alignment when not 32
  // Called before tensor i of n is filled (progress display).
  std::function<void(size_t i, size_t n, const OutputTensor&)> on_tensor;
};

// One tensor to write in any ggml type (a quantized one kept as it is, say): fill() writes exactly
// ne[0] / block x block bytes x the other ne bytes at dst. `shape` is nmkit's (ne reversed).
struct GgufOutputTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  Shape shape;
  std::function<Status(std::byte* dst)> fill;

  // The tensor's stored bytes, copied unchanged (borrows `file`, which must outlive the write).
  static GgufOutputTensor copy_of(const GgufFile& file, const GgufTensorInfo& info);
  // An OutputTensor of a dtype ggml has (F32, F16, BF16, F64, I8, I16, I32, I64); an Error names
  // the tensor otherwise.
  static Result<GgufOutputTensor> from(const OutputTensor& tensor);
};

// Writes a GGUF version 3 file: the metadata in the given order (a "general.alignment" entry in it
// is replaced by options.alignment), then the tensors in the given order, each at the next offset
// that is a multiple of the alignment, its data padded with zeros to the alignment (the last one
// too, as ggml writes). Tensor dtypes F32, F16, BF16 (and F64, I8, I16, I32, I64, which ggml also
// has); shapes are nmkit's (written reversed as ne), 1 to 4 dimensions; names at most 63 bytes
// (ggml's limit). Atomic like write_safetensors (PendingFile, nmkit/files.h): a temporary in the
// same folder renamed onto PATH only when every fill succeeded; a fill's Error is returned
// unchanged, an exception from a fill or callback becomes an Error naming PATH and the tensor.
Status write_gguf(const std::string& path, const std::vector<GgufKeyValue>& metadata,
                  const std::vector<OutputTensor>& tensors, const GgufWriteOptions& options = {});
// The same with tensors of any ggml type (ne[0] a multiple of the type's block); on_tensor is
// given an OutputTensor with the name and shape (dtype U8 for types that are not a DType).
Status write_gguf(const std::string& path, const std::vector<GgufKeyValue>& metadata,
                  const std::vector<GgufOutputTensor>& tensors, const GgufWriteOptions& options = {});

}  // namespace nmkit
