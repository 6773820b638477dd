// Names and constants of the quantization types.
#include "nmkit/quant.h"

#include "quant/quant_rules.h"

namespace nmkit {

uint8_t f32_to_e4m3(float value) { return quant_rules::e4m3_code(value); }

std::string_view quant_type_name(QuantType type) {
  return type == QuantType::Int8 ? "int8" : "e4m3";
}

Result<QuantType> quant_type_from_name(std::string_view name) {
  if (name == "int8") return QuantType::Int8;
  if (name == "e4m3" || name == "fp8") return QuantType::E4M3;
  return Error(ErrorCode::InvalidArgument,
               "unknown quantization type " + quote_name(name) + " (expected int8 or e4m3; fp8 means e4m3)");
}

}  // namespace nmkit
