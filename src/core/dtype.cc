#include "nmkit/dtype.h"
#include "nmkit/status.h"

#include <array>
#include <cstring>

namespace nmkit {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 15> kDTypes{{
    {DType::F64, "F64", 8},     {DType::F32, "F32", 4},         {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},   {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::I64, "I64", 8},     {DType::I32, "I32", 4},         {DType::I16, "I16", 2},
    {DType::I8, "I8", 1},       {DType::U64, "U64", 8},         {DType::U32, "U32", 4},
    {DType::U16, "U16", 2},     {DType::U8, "U8", 1},           {DType::Bool, "BOOL", 1},
}};

const DTypeInfo& info(DType dtype) { return kDTypes[static_cast<size_t>(dtype)]; }

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

static_assert(static_cast<size_t>(DType::Bool) + 1 == kDTypes.size());

size_t dtype_size(DType dtype) { return info(dtype).size; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }

Result<DType> dtype_from_name(std::string_view name) {
  std::string accepted;
  for (const auto& entry : kDTypes) {
    if (entry.name == name) return entry.dtype;
    accepted += accepted.empty() ? "" : ", ";
    accepted += entry.name;
  }
  return Error(ErrorCode::InvalidArgument, "unknown dtype " + quote_name(name) + " (expected one of " + accepted + ")");
}

bool is_prunable(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

bool is_floating(DType dtype) {
  return dtype == DType::F64 || is_prunable(dtype) || dtype == DType::F8_E4M3 ||
         dtype == DType::F8_E5M2;
}

uint16_t f32_to_f16(float value) {
  const uint32_t u = float_bits(value);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero) in f16: units of 2^-24, rounded to nearest even. Values below
    // 2^-25 round to zero; the float add below rounds exactly once, in round-to-nearest-even.
    const float magic = bits_float(0x4b000000u);  // 2^23: its ulp is 1, i.e. one 2^-24 unit scaled
    const float scaled = bits_float(abs) * 16777216.0f;  // exact: multiply by 2^24
    const uint32_t units = float_bits(scaled + magic) - 0x4b000000u;
    return static_cast<uint16_t>(sign | units);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  const uint32_t mantissa_odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xfffu + mantissa_odd;
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

namespace {

// f32 bits -> bf16 bits: round to nearest even; a NaN keeps its top bits and is made quiet. Written
// as a select so that loops over it vectorize.
inline uint32_t bf16_bits(uint32_t u) {
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return (u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
}

}  // namespace

uint16_t f32_to_bf16(float value) { return static_cast<uint16_t>(bf16_bits(float_bits(value))); }

void round_to_bf16(float* values, uint16_t* bits, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, values + i, 4);
    const uint32_t h = bf16_bits(u);  // < 2^16: a carry past bit 31 needs a NaN input, which takes the other branch
    const uint32_t back = h << 16;
    std::memcpy(values + i, &back, 4);
    if (bits != nullptr) bits[i] = static_cast<uint16_t>(h);
  }
}

void f32_to_bf16_bits(const float* values, uint16_t* bits, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, values + i, 4);
    bits[i] = static_cast<uint16_t>(bf16_bits(u));
  }
}

namespace {

// First element of `bits` whose exponent field (mask) is all ones: the branch-free OR first, which
// the compiler vectorizes, the search only when it found one.
template <class U>
int64_t first_with_exponent(const void* data, int64_t n, U mask) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  U any = 0;
  for (int64_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, bytes + i * sizeof(U), sizeof(U));
    any = static_cast<U>(any | static_cast<U>((u & mask) == mask));
  }
  if (any == 0) return -1;
  for (int64_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, bytes + i * sizeof(U), sizeof(U));
    if ((u & mask) == mask) return i;
  }
  return -1;
}

}  // namespace

int64_t first_non_finite(const float* x, int64_t n) { return first_with_exponent<uint32_t>(x, n, 0x7F800000u); }

int64_t first_non_finite_stored(DType dtype, const void* data, int64_t n) {
  switch (dtype) {
    case DType::F32: return first_with_exponent<uint32_t>(data, n, 0x7F800000u);
    case DType::F16: return first_with_exponent<uint16_t>(data, n, 0x7C00u);
    case DType::BF16: return first_with_exponent<uint16_t>(data, n, 0x7F80u);
    default: NMKIT_ASSERT(false && "first_non_finite_stored: a float dtype"); return -1;
  }
}

void convert_to_f32(DType dtype, const void* src, float* dst, size_t n) {
  if (n == 0) return;  // src may be null for an empty tensor
  switch (dtype) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::F16: {
      const auto* s = static_cast<const unsigned char*>(src);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    }
    case DType::BF16: {
      const auto* s = static_cast<const unsigned char*>(src);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    }
    default:
      NMKIT_ASSERT(false && "convert_to_f32: dtype is not prunable");
  }
}

void convert_from_f32(DType dtype, const float* src, void* dst, size_t n) {
  if (n == 0) return;  // dst may be null for an empty tensor
  switch (dtype) {
    case DType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::F16: {
      auto* d = static_cast<unsigned char*>(dst);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(src[i]);
        std::memcpy(d + 2 * i, &h, 2);
      }
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<unsigned char*>(dst);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(d + 2 * i, &h, 2);
      }
      return;
    }
    default:
      NMKIT_ASSERT(false && "convert_from_f32: dtype is not prunable");
  }
}

}  // namespace nmkit
