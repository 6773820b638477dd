// The word-at-a-time non-zero test of the compressors (format/elements.h, word_nonzero_bits) against
// the element-by-element one, on the bit patterns that decide it: +-0, the smallest subnormals,
// NaN and infinity payloads, the sign bit alone, and random words.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "format/elements.h"

namespace nmkit::format_detail {
namespace {

template <class E>
void expect_same_bits(const std::vector<E>& elements, E mag) {
  ASSERT_EQ(elements.size() % 64, 0u);
  for (size_t w = 0; w < elements.size() / 64; ++w) {
    const auto* p = reinterpret_cast<const std::byte*>(elements.data() + w * 64);
    int count = 0;
    const uint64_t expected = nonzero_bits<E>(p, 64, mag, count);
    EXPECT_EQ(word_nonzero_bits<E>(p, mag), expected) << "word " << w << " mag " << +mag;
  }
}

template <class E>
std::vector<E> patterns(uint64_t seed) {
  const E sign = static_cast<E>(E{1} << (8 * sizeof(E) - 1));
  const std::vector<E> special = {0, sign, 1, static_cast<E>(sign | 1), static_cast<E>(sign - 1),
                                  static_cast<E>(~E{0}), static_cast<E>(sign >> 1), static_cast<E>(sign | (sign >> 1))};
  std::mt19937_64 rng(seed);
  std::vector<E> out;
  for (int w = 0; w < 400; ++w) {
    for (int j = 0; j < 64; ++j) {
      // Words mostly of +-0 with a few special or random elements, so every lane position sees
      // zero and non-zero neighbours.
      const uint64_t r = rng();
      E v = (r & 4) != 0 ? sign : E{0};
      if ((r & 3) == 0) v = special[(r >> 3) % special.size()];
      if ((r & 3) == 1) v = static_cast<E>(r >> 8);
      out.push_back(v);
    }
  }
  return out;
}

TEST(WordNonzeroBits, SixteenBitLanesAsElementByElement) {
  const std::vector<uint16_t> e = patterns<uint16_t>(1);
  expect_same_bits<uint16_t>(e, 0x7FFF);  // f16, bf16
  expect_same_bits<uint16_t>(e, 0xFFFF);  // any bit
  expect_same_bits<uint16_t>(e, 0x00FF);
}

TEST(WordNonzeroBits, ThirtyTwoBitLanesAsElementByElement) {
  const std::vector<uint32_t> e = patterns<uint32_t>(2);
  expect_same_bits<uint32_t>(e, 0x7FFFFFFFu);  // f32
  expect_same_bits<uint32_t>(e, 0xFFFFFFFFu);
  expect_same_bits<uint32_t>(e, 0x80000000u);
}

// The 16-nibble check of validate(Sparse24) against the per-nibble rule: every nibble value at every
// position among valid neighbours, and random words.
TEST(WordBits, Sparse24NibblesAMachineWordAtATime) {
  const uint64_t valid_word = 0x4444444444444444ull;
  EXPECT_TRUE(all_sparse24_nibbles_valid(valid_word));
  for (int pos = 0; pos < 16; ++pos) {
    for (uint64_t nibble = 0; nibble < 16; ++nibble) {
      const uint64_t word = (valid_word & ~(uint64_t{0xF} << (4 * pos))) | (nibble << (4 * pos));
      EXPECT_EQ(all_sparse24_nibbles_valid(word), valid_sparse24_nibble(static_cast<unsigned>(nibble)))
          << "nibble " << nibble << " at " << pos;
    }
  }
  std::mt19937_64 rng(24);
  const unsigned valid[6] = {0x4, 0x8, 0x9, 0xC, 0xD, 0xE};
  for (int i = 0; i < 20000; ++i) {
    uint64_t word = 0;
    bool expected = true;
    for (int pos = 0; pos < 16; ++pos) {
      // Mostly valid nibbles, so that whole words pass as often as they fail.
      const uint64_t r = rng();
      const unsigned nibble = (r % 64) != 0 ? valid[(r >> 8) % 6] : static_cast<unsigned>((r >> 16) & 0xF);
      expected = expected && valid_sparse24_nibble(nibble);
      word |= uint64_t{nibble} << (4 * pos);
    }
    ASSERT_EQ(all_sparse24_nibbles_valid(word), expected) << std::hex << word;
  }
}

}  // namespace
}  // namespace nmkit::format_detail
