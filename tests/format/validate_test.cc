// Structural validation of packed tensors read from files: every corruption is an Error naming the
// tensor and the first bad row/group/value; what compress produces always validates.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/prune.h"
#include "tests/util/deadline.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

void expect_error(const Status& s, const std::vector<std::string>& parts) {
  ASSERT_FALSE(s.ok());
  for (const auto& part : parts) {
    EXPECT_NE(s.error().message().find(part), std::string::npos)
        << "'" << part << "' not in: " << s.error().message();
  }
}

Sparse24 packed24(int64_t rows, int64_t K, uint64_t seed) {
  const Tensor w = test::random_tensor(DType::F16, {rows, K}, seed);
  auto pruned = prune(w.view(), Pattern{2, 4}, PruneMethod::Magnitude);
  NMKIT_ASSERT(pruned.ok());
  auto packed = compress_sparse24(pruned->pruned.view());
  NMKIT_ASSERT(packed.ok());
  return std::move(*packed);
}

NMPacked packed_nm(int64_t rows, int64_t K, Pattern p, uint64_t seed) {
  const Tensor w = test::random_tensor(DType::BF16, {rows, K}, seed);
  auto pruned = prune(w.view(), p, PruneMethod::Magnitude);
  NMKIT_ASSERT(pruned.ok());
  auto packed = compress_nm(pruned->pruned.view(), p);
  NMKIT_ASSERT(packed.ok());
  return std::move(*packed);
}

TEST(ValidateSparse24, EveryInvalidNibbleIsRejected) {
  for (unsigned nibble = 0; nibble < 16; ++nibble) {
    Sparse24 p = packed24(3, 20, 1);  // 5 groups: bytes 0..2, the last high nibble unused
    uint8_t& byte = p.meta.as<uint8_t>()[1 * p.meta_stride() + 1];  // row 1, groups 2 and 3
    byte = static_cast<uint8_t>((byte & 0x0F) | (nibble << 4));     // group 3
    const bool valid = nibble == 0x4 || nibble == 0x8 || nibble == 0x9 || nibble == 0xC ||
                       nibble == 0xD || nibble == 0xE;
    const Status s = validate(p, "q");
    if (valid) {
      EXPECT_TRUE(s.ok()) << nibble;
    } else {
      expect_error(s, {"'q'", "row 1", "group 3", std::to_string(nibble)});
    }
  }
}

TEST(ValidateSparse24, UnusedNibblePaddingValuesAndShapes) {
  {
    Sparse24 p = packed24(2, 20, 2);
    p.meta.as<uint8_t>()[p.meta_stride() + 2] |= 0x40;  // row 1, unused high nibble
    expect_error(validate(p, "q"), {"row 1", "unused"});
  }
  {
    // K = 5: the tail group has one real element, so its second slot is a padding position.
    const Tensor d = Tensor::from_f32({1, 0, 0, 2, 3}, {1, 5});
    auto p = compress_sparse24(d.view());
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(validate(*p, "q").ok());
    p->values.as<float>()[3] = 7.0f;  // group 1 slot 1 names column 5 >= K
    expect_error(validate(*p, "q"), {"row 0", "group 1", "padding", "5"});
  }
  {
    Sparse24 p = packed24(2, 8, 3);
    p.values = Tensor::zeros(DType::F16, {2, 3});
    expect_error(validate(p, "q"), {"values", "[2, 3]", "[2, 4]"});
  }
  {
    Sparse24 p = packed24(2, 8, 4);
    p.meta = Tensor::zeros(DType::I8, {2, 1});
    expect_error(validate(p, "q"), {"meta", "I8"});
  }
  {
    Sparse24 p = packed24(2, 8, 5);
    p.values = Tensor::zeros(DType::I32, {2, 4});  // the dtype is the values'
    expect_error(validate(p, "q"), {"I32"});
  }
}

TEST(ValidateNm, BitCountsBitsBeyondPaddingValuesAndShapes) {
  const Pattern p68{6, 8};
  {
    NMPacked p = packed_nm(3, 21, p68, 6);  // groups of 8: 0..7, 8..15, tail 16..20 (+3 padding)
    ASSERT_TRUE(validate(p, "m").ok());
    uint8_t* row2 = p.mask.as<uint8_t>() + 2 * p.mask_stride();
    row2[1] ^= 0x01;  // toggles one bit of group 1: 5 or 7 bits
    expect_error(validate(p, "m"), {"'m'", "6:8", "row 2", "group 1", "expected 6"});
  }
  {
    NMPacked p = packed_nm(1, 21, Pattern{2, 4}, 7);  // K_pad = 24: exactly 3 bytes, no spare bits
    NMPacked q = packed_nm(1, 18, Pattern{1, 3}, 8);  // K_pad = 18: bits 18..23 unused
    ASSERT_TRUE(validate(p, "m").ok());
    ASSERT_TRUE(validate(q, "m").ok());
    q.mask.as<uint8_t>()[2] |= 0x80;  // bit 23
    expect_error(validate(q, "m"), {"row 0", "bit 23", "beyond"});
  }
  {
    // K = 9 with 6:8: the tail group has one real element and five padding slots.
    const Tensor d = Tensor::from_f32({1, 2, 0, 3, 4, 5, 6, 0, 9}, {1, 9});
    auto p = compress_nm(d.view(), p68);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(validate(*p, "m").ok());
    EXPECT_EQ(decompress(*p).to_f32(), d.to_f32());
    p->values.as<float>()[6 + 3] = 1.0f;  // group 1, slot 3: a padding column
    expect_error(validate(*p, "m"), {"group 1", "padding"});
  }
  {
    NMPacked p = packed_nm(2, 16, p68, 9);
    p.values = Tensor::zeros(DType::BF16, {2, 11});
    expect_error(validate(p, "m"), {"values", "[2, 11]", "[2, 12]"});
  }
  {
    NMPacked p = packed_nm(2, 16, p68, 10);
    p.mask = Tensor::zeros(DType::U8, {2, 3});
    expect_error(validate(p, "m"), {"mask", "[2, 3]", "[2, 2]"});
  }
  {
    NMPacked p = packed_nm(2, 16, p68, 11);
    p.pattern = Pattern{8, 8};
    expect_error(validate(p, "m"), {"'m'", "8:8"});
  }
}

// Validation runs rows in parallel: whatever row a thread reaches first, the error names the first
// bad row in row-major order (here many grains apart, so that two threads hold the two faults).
TEST(ValidateRows, NamesTheFirstBadRowWhateverTheThreads) {
  NMPacked nm = packed_nm(4000, 200, Pattern{6, 8}, 21);
  nm.mask.as<uint8_t>()[3900 * nm.mask_stride()] ^= 0x01;
  nm.mask.as<uint8_t>()[1700 * nm.mask_stride() + 3] ^= 0x01;  // group 3
  expect_error(validate(nm, "m"), {"row 1700,", "group 3"});
  Sparse24 s = packed24(4000, 200, 22);
  s.meta.as<uint8_t>()[3990 * s.meta_stride()] = 0x00;
  s.meta.as<uint8_t>()[2100 * s.meta_stride() + 1] = 0x0F;  // group 2: nibble 15 names one column twice
  expect_error(validate(s, "q"), {"row 2100,", "group 2", "nibble 15"});
}

// Groups that divide 64 are counted a word at a time; a wrong count anywhere in a word is still
// found and named (group sizes 2 to 32, the fault in the first, a middle and the last full word).
TEST(ValidateNm, WordAtATimeCountsFindEveryBadGroup) {
  for (const Pattern p : {Pattern{1, 2}, Pattern{2, 4}, Pattern{6, 8}, Pattern{5, 16}, Pattern{17, 32}}) {
    const int64_t K = 3 * 64 + 5 * p.group + 3;  // three full words, then groups and a tail
    const int64_t per_word = 64 / p.group;
    for (const int64_t bad_group : {int64_t{1}, per_word + 2, 3 * per_word - 1}) {
      NMPacked nm = packed_nm(5, K, p, 30 + static_cast<uint64_t>(bad_group));
      ASSERT_TRUE(validate(nm, "m").ok()) << p.str();
      const int64_t bit = bad_group * p.group + 1;
      nm.mask.as<uint8_t>()[3 * nm.mask_stride() + bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      expect_error(validate(nm, "m"), {"row 3,", "group " + std::to_string(bad_group) + " has"});
    }
  }
}

TEST(Compress, RejectsBadInputs) {
  const Tensor i = Tensor::zeros(DType::I16, {2, 8});
  expect_error(compress_sparse24(i.view(), "x").ok() ? Status() : compress_sparse24(i.view(), "x").error(),
               {"'x'", "I16"});
  const Tensor one_d = Tensor::zeros(DType::F32, {8});
  expect_error(compress_nm(one_d.view(), Pattern{2, 4}, "x").ok() ? Status()
                                                                 : compress_nm(one_d.view(), Pattern{2, 4}, "x").error(),
               {"'x'", "2-D", "[8]"});
  const Tensor f = Tensor::zeros(DType::F32, {2, 8});
  auto bad = compress_nm(f.view(), Pattern{3, 3}, "x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("3:3"), std::string::npos);
}

TEST(MemoryBytes, MatchTheLayouts) {
  // 6:8 costs one mask byte per group plus six values; sparse24 half the values plus 4 bits/group.
  const NMPacked p = packed_nm(3, 64, Pattern{6, 8}, 12);
  EXPECT_EQ(p.memory_bytes(), static_cast<size_t>(3 * (8 * 6 * 2 + 8)));
  const Sparse24 s = packed24(3, 66, 13);  // K_pad 68: 34 values and ceil(68/8) = 9 meta bytes
  EXPECT_EQ(s.memory_bytes(), static_cast<size_t>(3 * (34 * 2 + 9)));
}

// Issue 13 C1: a record [2^48, 0] has zero-byte parts and passed the header checks; validation and
// decompression then looped over 2^48 rows (days). Both must take O(bytes) time.
TEST(ValidateEmptyRows, HugeRowCountWithNoColumnsIsQuick) {
  const int64_t rows = int64_t{1} << 48;
  for (const DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    Sparse24 s;
    s.K = 0;
    s.values = Tensor::empty(dtype, {rows, 0});
    s.meta = Tensor::empty(DType::U8, {rows, 0});
    EXPECT_TRUE(test::finishes_within(10, "validate(sparse24 [2^48, 0])",
                                      [&] { return validate(s, "w").ok(); }));
    const Tensor dense24 =
        test::finishes_within(10, "decompress(sparse24 [2^48, 0])", [&] { return decompress(s); });
    EXPECT_EQ(dense24.shape(), (Shape{rows, 0}));
    EXPECT_EQ(dense24.dtype(), dtype);

    NMPacked n;
    n.pattern = Pattern{6, 8};
    n.K = 0;
    n.values = Tensor::empty(dtype, {rows, 0});
    n.mask = Tensor::empty(DType::U8, {rows, 0});
    EXPECT_TRUE(test::finishes_within(10, "validate(nm [2^48, 0])",
                                      [&] { return validate(n, "w").ok(); }));
    const Tensor dense_nm =
        test::finishes_within(10, "decompress(nm [2^48, 0])", [&] { return decompress(n); });
    EXPECT_EQ(dense_nm.shape(), (Shape{rows, 0}));

    // Compressing such a dense tensor (no bytes) is as quick, and finds no violation.
    TensorView view{dtype, {rows, 0}, nullptr};
    const bool packed = test::finishes_within(10, "compress_sparse24(dense [2^48, 0])", [&] {
      auto c = compress_sparse24(view, "w");
      return c.ok() && c->rows() == rows && c->values.nbytes() == 0;
    });
    EXPECT_TRUE(packed);
    EXPECT_TRUE(test::finishes_within(10, "compress_nm(dense [2^48, 0])", [&] {
      auto c = compress_nm(view, Pattern{1, 4}, "w");
      return c.ok() && c->rows() == rows && c->mask.nbytes() == 0;
    }));
    EXPECT_FALSE(test::finishes_within(10, "find_violation(dense [2^48, 0])", [&] {
      return find_violation(view, Pattern{1, 4}).has_value();
    }));
  }
}

// The dtype and row count of a packed weight are its values tensor's: they cannot disagree, and a
// meta or mask with another row count is an Error.
TEST(ValidateEmptyRows, RowsAndDtypeComeFromTheValues) {
  Sparse24 s = packed24(3, 10, 9);
  EXPECT_EQ(s.rows(), 3);
  EXPECT_EQ(s.dtype(), DType::F16);
  s.meta = Tensor::zeros(DType::U8, {4, s.meta_stride()});
  expect_error(validate(s, "q"), {"meta", "[4, 2]", "[3, 2]"});
  NMPacked n = packed_nm(3, 10, Pattern{2, 4}, 10);
  EXPECT_EQ(n.rows(), 3);
  EXPECT_EQ(n.dtype(), DType::BF16);
  n.mask = Tensor::zeros(DType::U8, {2, n.mask_stride()});
  expect_error(validate(n, "q"), {"mask", "[2, 2]", "[3, 2]"});
}

}  // namespace
}  // namespace nmkit
