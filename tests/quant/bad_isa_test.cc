// An NMKIT_ISA that names no tier this machine runs is an Error returned by every call that needs the
// kernel table (the library never exits: issue 9.3). ctest runs this suite once more with
// NMKIT_ISA=sse9 (tests/CMakeLists.txt, quant_bad_isa); under a valid tier it skips.
#include <gtest/gtest.h>

#include <string>

#include "nmkit/format.h"
#include "nmkit/linear.h"
#include "nmkit/quant.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

void expect_isa_error(const Error& error, const char* call) {
  EXPECT_NE(error.message().find("NMKIT_ISA="), std::string::npos) << call << ": " << error.message();
}

TEST(BadIsa, EveryCallThatNeedsTheTableIsAnError) {
  if (active_tier().ok()) GTEST_SKIP() << "runs under an invalid NMKIT_ISA only (ctest: quant_bad_isa)";
  const Tensor x = test::random_tensor(DType::F32, {3, 8}, 1, -1.0f, 1.0f);
  auto tokens = quantize_tokens(x.view(), QuantType::Int8, "x");
  ASSERT_FALSE(tokens.ok());
  expect_isa_error(tokens.error(), "quantize_tokens");
  auto weights = quantize_weights(x.view(), QuantType::E4M3, "w");
  ASSERT_FALSE(weights.ok());
  expect_isa_error(weights.error(), "quantize_weights");
  auto geometry = SlideGeometry::make(Pattern{6, 8}, 8, 4);
  ASSERT_TRUE(geometry.ok());
  auto lifted = quantize_lift(x.view(), *geometry, QuantType::Int8, "x");
  ASSERT_FALSE(lifted.ok());
  expect_isa_error(lifted.error(), "quantize_lift");
  std::vector<std::byte> codes(24);
  float scales[3];
  const Status into = quantize_tokens_into(x.view(), QuantType::Int8, nullptr, codes.data(), 8, scales, "x");
  ASSERT_FALSE(into.ok());
  expect_isa_error(into.error(), "quantize_tokens_into");
  auto layer = SparseLinear::dense(x.view());
  ASSERT_FALSE(layer.ok());
  expect_isa_error(layer.error(), "SparseLinear::dense");
}

}  // namespace
}  // namespace nmkit
