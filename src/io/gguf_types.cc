// ggml tensor types and GGUF value types: names and block sizes (ggml's GGML_QUANT_SIZES, as the
// PyPI gguf package lists them in gguf/constants.py), and GgufValue's accessors.
#include <limits>
#include <utility>

#include "nmkit/gguf.h"

namespace nmkit {
namespace {

struct TypeTraits {
  GgmlType type;
  std::string_view name;
  uint32_t block_elements;
  uint32_t block_bytes;
};

constexpr TypeTraits kTypes[] = {
    {GgmlType::F32, "F32", 1, 4},          {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},      {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},      {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},      {GgmlType::Q8_1, "Q8_1", 32, 40},
    {GgmlType::Q2_K, "Q2_K", 256, 84},     {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144},    {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210},    {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66}, {GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98}, {GgmlType::IQ1_S, "IQ1_S", 256, 50},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18},  {GgmlType::IQ3_S, "IQ3_S", 256, 110},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82},   {GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::I8, "I8", 1, 1},            {GgmlType::I16, "I16", 1, 2},
    {GgmlType::I32, "I32", 1, 4},          {GgmlType::I64, "I64", 1, 8},
    {GgmlType::F64, "F64", 1, 8},          {GgmlType::IQ1_M, "IQ1_M", 256, 56},
    {GgmlType::BF16, "BF16", 1, 2},        {GgmlType::TQ1_0, "TQ1_0", 256, 54},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66},   {GgmlType::MXFP4, "MXFP4", 32, 17},
};

const TypeTraits* traits(uint32_t number) {
  for (const TypeTraits& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == number) return &t;
  }
  return nullptr;
}

const TypeTraits& known(GgmlType type) {
  const TypeTraits* t = traits(static_cast<uint32_t>(type));
  NMKIT_ASSERT(t != nullptr);
  return *t;
}

bool is_signed(GgufType type) {
  return type == GgufType::I8 || type == GgufType::I16 || type == GgufType::I32 || type == GgufType::I64;
}

}  // namespace

std::string_view ggml_type_name(GgmlType type) { return known(type).name; }

std::optional<GgmlType> ggml_type_from_number(uint32_t number) {
  const TypeTraits* t = traits(number);
  if (t == nullptr) return std::nullopt;
  return t->type;
}

uint32_t ggml_block_elements(GgmlType type) { return known(type).block_elements; }
uint32_t ggml_block_bytes(GgmlType type) { return known(type).block_bytes; }

bool ggml_can_dequantize(GgmlType type) {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q8_0: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::Bool: return "bool";
    case GgufType::String: return "string";
    case GgufType::Array: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16:
    case GgufType::U32: case GgufType::I32: case GgufType::U64: case GgufType::I64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_float() const { return type == GgufType::F32 || type == GgufType::F64; }

std::optional<int64_t> GgufValue::as_int() const {
  if (!is_integer()) return std::nullopt;
  if (is_signed(type)) return static_cast<int64_t>(integer);
  if (integer > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(integer);
}

std::optional<uint64_t> GgufValue::as_uint() const {
  if (!is_integer()) return std::nullopt;
  if (is_signed(type) && static_cast<int64_t>(integer) < 0) return std::nullopt;
  return integer;
}

GgufValue GgufValue::of_string(std::string text) {
  GgufValue v;
  v.type = GgufType::String;
  v.string = std::move(text);
  return v;
}

GgufValue GgufValue::of_uint32(uint32_t value) {
  GgufValue v;
  v.type = GgufType::U32;
  v.integer = value;
  return v;
}

GgufValue GgufValue::of_int32(int32_t value) {
  GgufValue v;
  v.type = GgufType::I32;
  v.integer = static_cast<uint64_t>(static_cast<int64_t>(value));
  return v;
}

GgufValue GgufValue::of_uint64(uint64_t value) {
  GgufValue v;
  v.type = GgufType::U64;
  v.integer = value;
  return v;
}

GgufValue GgufValue::of_float32(float value) {
  GgufValue v;
  v.type = GgufType::F32;
  v.real = value;
  return v;
}

GgufValue GgufValue::of_bool(bool value) {
  GgufValue v;
  v.type = GgufType::Bool;
  v.integer = value ? 1 : 0;
  return v;
}

GgufValue GgufValue::of_array(GgufType element_type, std::vector<GgufValue> elements) {
  GgufValue v;
  v.type = GgufType::Array;
  v.element_type = element_type;
  v.elements = std::move(elements);
  return v;
}

Shape GgufTensorInfo::shape() const { return Shape(ne.rbegin(), ne.rend()); }

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (const int64_t d : ne) n *= d;  // validated on open not to overflow
  return n;
}

}  // namespace nmkit
