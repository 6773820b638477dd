// The cutlass_sm80 layout's own contract, without CUDA (tests/cuda/cutlass_sm80_oracle_test.cu checks
// the bytes against CUTLASS): the round trip restores sparse24's bytes, and validate() names a bad
// nibble, a padding group that is not 0x4 and a non-zero padding value.
#include <gtest/gtest.h>

#include <cstring>

#include "nmkit/cutlass_sm80.h"
#include "nmkit/prune.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// A bf16 2:4 weight (16-bit metadata words: rows padded to 32, K to 32).
Sparse24 bf16_24(int64_t rows, int64_t K) {
  auto pruned = prune(test::random_tensor(DType::BF16, {rows, K}, 8).view(), {2, 4}, PruneMethod::Magnitude);
  NMKIT_ASSERT(pruned.ok());
  auto packed = compress_sparse24(pruned->pruned.view());
  NMKIT_ASSERT(packed.ok());
  return std::move(*packed);
}

TEST(CutlassSm80, RoundTripRestoresSparse24) {
  for (const int64_t K : {4, 36, 100}) {
    const Sparse24 s = bf16_24(20, K);
    auto layout = to_cutlass_sm80(s, "w");
    ASSERT_TRUE(layout.ok()) << layout.error().message();
    EXPECT_EQ(layout->values.shape(), (Shape{32, (K + 31) / 32 * 16}));
    auto back = from_cutlass_sm80(*layout, "w");
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_EQ(0, std::memcmp(back->values.data(), s.values.data(), s.values.nbytes())) << K;
    EXPECT_EQ(0, std::memcmp(back->meta.data(), s.meta.data(), s.meta.nbytes())) << K;
  }
}

TEST(CutlassSm80, ValidateNamesTheBadPlace) {
  const Sparse24 s = bf16_24(16, 36);  // K 36 -> 64: groups 9..15 of each row are padding
  auto layout = to_cutlass_sm80(s, "w");
  ASSERT_TRUE(layout.ok());
  ASSERT_TRUE(validate(*layout, "w").ok());

  auto bad_meta = to_cutlass_sm80(s, "w");
  bad_meta->meta.as<uint8_t>()[0] = 0x00;  // word (0, 0) lies first: groups 0 and 1 of row 0
  auto status = validate(*bad_meta, "w");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("row 0, group 0 has metadata nibble 0"), std::string::npos)
      << status.error().message();

  auto bad_padding = to_cutlass_sm80(s, "w");
  bad_padding->values.as<uint16_t>()[2 * 10] = 0x3F80;  // 1.0 as row 0, group 10's first value
  status = validate(*bad_padding, "w");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("row 0, group 10 has a non-zero value at padding position 40"),
            std::string::npos) << status.error().message();
  EXPECT_FALSE(from_cutlass_sm80(*bad_padding, "w").ok());
}

}  // namespace
}  // namespace nmkit
