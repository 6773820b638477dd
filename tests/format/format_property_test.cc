// Property tests on random pruned tensors of awkward shapes in every prunable dtype: packing
// agrees with the oracle bit for bit, validates, and decompresses to the same bits.
#include <gtest/gtest.h>

#include <vector>

#include "nmkit/format.h"
#include "nmkit/prune.h"
#include "tests/format/fill_oracle.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

TEST(FormatProperty, RandomPrunedTensorsRoundTrip) {
  const std::vector<Pattern> patterns{{2, 4}, {4, 8}, {6, 8}, {1, 4}, {3, 7}, {1, 2}, {15, 16}};
  const std::vector<std::pair<int64_t, int64_t>> shapes{
      {1, 1}, {3, 3}, {2, 15}, {17, 16}, {5, 17}, {16, 100}, {3, 1000}, {1, 4097}};
  uint64_t seed = 555;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (const Pattern& p : patterns) {
      for (auto [rows, K] : shapes) {
        ++seed;
        SCOPED_TRACE(test::seed_trace(seed));
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + p.str() + " [" + std::to_string(rows) +
                     ", " + std::to_string(K) + "]");
        // Small integers: many exact zeros before pruning, so groups hold fewer than keep
        // non-zeros and the zero-fill rule is exercised too; every other seed uniform values,
        // so that every group holds exactly keep (nm's word-at-a-time path).
        const Tensor w = seed % 2 == 0
                             ? Tensor::from_f32(test::random_small_ints(rows * K, seed, -2, 2), {rows, K}, dtype)
                             : test::random_tensor(dtype, {rows, K}, seed);
        auto pruned = prune(w.view(), p, PruneMethod::Magnitude);
        ASSERT_TRUE(pruned.ok());
        const Tensor& dense = pruned->pruned;

        auto nm = compress_nm(dense.view(), p, "t");
        ASSERT_TRUE(nm.ok()) << nm.error().message();
        std::vector<uint32_t> values;
        std::vector<uint8_t> mask;
        test::expected_nm(dense, p, values, mask);
        ASSERT_EQ(test::all_bits(nm->values), values);
        ASSERT_EQ(test::all_bytes(nm->mask), mask);
        ASSERT_TRUE(validate(*nm, "t").ok());
        ASSERT_EQ(test::all_bits(decompress(*nm)), test::all_bits(dense));
        EXPECT_EQ(nm->memory_bytes(),
                  static_cast<size_t>(rows * (p.groups(K) * p.keep * static_cast<int64_t>(dtype_size(dtype)) +
                                              (p.padded(K) + 7) / 8)));

        // Patterns at most as dense as 2:4 within every aligned run of four also pack as sparse24.
        if (!find_violation(dense.view(), Pattern{2, 4})) {
          auto s = compress_sparse24(dense.view(), "t");
          ASSERT_TRUE(s.ok()) << s.error().message();
          std::vector<uint8_t> meta;
          test::expected_sparse24(dense, values, meta);
          ASSERT_EQ(test::all_bits(s->values), values);
          ASSERT_EQ(test::all_bytes(s->meta), meta);
          ASSERT_TRUE(validate(*s, "t").ok());
          ASSERT_EQ(test::all_bits(decompress(*s)), test::all_bits(dense));
        } else {
          EXPECT_FALSE(compress_sparse24(dense.view(), "t").ok());
        }
      }
    }
  }
}

}  // namespace
}  // namespace nmkit
