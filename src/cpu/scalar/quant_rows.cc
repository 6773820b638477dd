// Per-token quantization, plain and fused with lifting, for any x86-64: the structure of the SIMD
// tiers (absmax from |x| bits, one multiply by inv per value, codes then gather) without vectors.
#include <algorithm>
#include <cstring>

#include "cpu/quant_kernels.h"
#include "quant/quant_rules.h"

namespace nmkit::cpu::scalar {
namespace {

uint32_t abs_bits_max(DType dtype, const std::byte* row, int64_t K) {
  uint32_t max = 0;
  if (dtype == DType::F32) {
    for (int64_t k = 0; k < K; ++k) {
      uint32_t bits;
      std::memcpy(&bits, row + 4 * k, 4);
      max = std::max(max, bits & 0x7FFFFFFFu);
    }
  } else {
    const uint32_t mask = 0x7FFF;
    for (int64_t k = 0; k < K; ++k) {
      uint16_t bits;
      std::memcpy(&bits, row + 2 * k, 2);
      max = std::max(max, bits & mask);
    }
  }
  return max;
}

}  // namespace

int64_t quantize_rows(const QuantRowsArgs& args, int64_t begin, int64_t end, std::byte* scratch) {
  const float qmax = quant_max(args.type);
  const bool gather = args.lift != nullptr && args.lift->N > 2;
  auto* codes = reinterpret_cast<uint8_t*>(scratch);
  // The scalar tier ignores args.stream: it exists for the SIMD tiers' bandwidth.
  const int64_t codes_bytes = quant_codes_bytes(args.lift, args.K, args.cols);
  std::memset(codes + args.K, 0, static_cast<size_t>(codes_bytes - args.K));
  for (int64_t m = begin; m < end; ++m) {
    const std::byte* src = args.src + m * args.src_stride;
    auto* dst = reinterpret_cast<uint8_t*>(args.dst + m * args.dst_stride);
    const uint32_t bits = abs_bits_max(args.src_dtype, src, args.K);
    if (bits >= nonfinite_abs_bits(args.src_dtype)) return m;
    if (bits == 0) {
      std::memset(dst, 0, static_cast<size_t>(args.cols));
      args.scales[m] = 1.0f;
      continue;
    }
    const quant_rules::RowScale row = quant_rules::row_scale(abs_bits_to_f32(args.src_dtype, bits), qmax);
    args.scales[m] = row.scale;
    quantize_row_values(args, src, row.inv, gather ? codes : dst);
    if (gather) {
      gather_lifted_row(args, codes, dst);
    } else if (args.cols > args.K) {  // 2:4 lifting: identity plus zero padding
      std::memset(dst + args.K, 0, static_cast<size_t>(args.cols - args.K));
    }
  }
  return -1;
}

}  // namespace nmkit::cpu::scalar
