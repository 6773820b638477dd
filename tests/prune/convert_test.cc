// The pruning loop's own f16 -> f32 block conversion agrees with the core's for all 65536 codes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "nmkit/dtype.h"
#include "prune/convert.h"

namespace nmkit {
namespace {

TEST(PruneConvert, F16BlockConversionMatchesCoreOnEveryCode) {
  std::vector<uint16_t> codes(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes[c] = static_cast<uint16_t>(c);
  std::vector<float> got(65536);
  prune_detail::f16_block_to_f32(codes.data(), got.data(), 65536);
  for (uint32_t c = 0; c < 65536; ++c) {
    const float expected = f16_to_f32(static_cast<uint16_t>(c));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got[c])) << std::hex << c;
      ASSERT_EQ(std::signbit(got[c]), std::signbit(expected)) << std::hex << c;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[c]), std::bit_cast<uint32_t>(expected)) << std::hex << c;
    }
  }
}

}  // namespace
}  // namespace nmkit
