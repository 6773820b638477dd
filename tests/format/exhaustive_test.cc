// Exhaustive round trips (docs/design.md 4.2/4.3 and 10.7): every subset of a group's positions as the
// non-zero pattern, for nm with every group width up to 16 and every keep, and for sparse24 with
// every row of up to 12 elements (several groups and every tail). Compliant rows must pack exactly
// as the oracle says and decompress to the same bits; the others must be reported with their row,
// group and non-zero count.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "nmkit/format.h"
#include "tests/format/fill_oracle.h"

namespace nmkit {
namespace {

// Distinct non-zero values (with both signs) where `bits` has a 1, +0 (or -0) elsewhere.
float element(uint64_t bits, int64_t r, int j, bool negative_zero) {
  if ((bits >> j) & 1u) {
    const float v = static_cast<float>(1 + (r + 3 * j) % 13);
    return (j % 2) ? -v : v;
  }
  return negative_zero ? -0.0f : 0.0f;
}

TEST(ExhaustiveNm, EverySubsetOfEveryGroupWidthAndKeep) {
  for (int g = 2; g <= 16; ++g) {
    for (int keep = 1; keep < g; ++keep) {
      const Pattern p{keep, g};
      std::vector<uint64_t> ok_masks;
      for (uint64_t m = 0; m < (uint64_t{1} << g); ++m) {
        if (std::popcount(m) <= keep) ok_masks.push_back(m);
      }
      const auto rows = static_cast<int64_t>(ok_masks.size());
      std::vector<float> v(rows * g);
      for (int64_t r = 0; r < rows; ++r) {
        for (int j = 0; j < g; ++j) v[r * g + j] = element(ok_masks[r], r, j, false);
      }
      const Tensor dense = Tensor::from_f32(v, {rows, g});
      auto packed = compress_nm(dense.view(), p, "t");
      ASSERT_TRUE(packed.ok()) << p.str() << ": " << packed.error().message();
      std::vector<uint32_t> values;
      std::vector<uint8_t> mask;
      test::expected_nm(dense, p, values, mask);
      ASSERT_EQ(test::all_bits(packed->values), values) << p.str();
      ASSERT_EQ(test::all_bytes(packed->mask), mask) << p.str();
      ASSERT_TRUE(validate(*packed, "t").ok()) << p.str();
      const Tensor back = decompress(*packed);
      ASSERT_EQ(test::all_bits(back), test::all_bits(dense)) << p.str();
      ASSERT_FALSE(find_violation(dense.view(), p).has_value()) << p.str();
    }
  }
}

TEST(ExhaustiveNm, EveryNonCompliantSubsetIsReportedWithItsCount) {
  for (int g = 2; g <= 16; ++g) {
    std::vector<float> row(static_cast<size_t>(g));
    for (uint64_t m = 0; m < (uint64_t{1} << g); ++m) {
      for (int j = 0; j < g; ++j) row[j] = element(m, 0, j, true);
      const TensorView view{DType::F32, {1, g}, reinterpret_cast<const std::byte*>(row.data())};
      const int nz = std::popcount(m);
      for (int keep = 1; keep < g; ++keep) {
        const auto violation = find_violation(view, Pattern{keep, g});
        ASSERT_EQ(violation.has_value(), nz > keep) << "g=" << g << " mask=" << m;
        if (!violation) continue;
        ASSERT_EQ(violation->row, 0);
        ASSERT_EQ(violation->group, 0);
        ASSERT_EQ(violation->nonzeros, nz);
        if (g <= 8) {  // the message, for the small widths (string building is the slow part)
          auto packed = compress_nm(view, Pattern{keep, g}, "w.q");
          ASSERT_FALSE(packed.ok());
          const std::string& msg = packed.error().message();
          for (const std::string& part :
               {std::string("'w.q'"), std::string("row 0"), std::string("group 0"),
                std::to_string(nz) + " non-zeros", Pattern{keep, g}.str()}) {
            ASSERT_NE(msg.find(part), std::string::npos) << part << " not in " << msg;
          }
        }
      }
    }
  }
}

// -0 is a zero: it may fill a slot (and is then restored with its sign), and an unstored -0
// decompresses to +0, equal in value.
TEST(ExhaustiveNm, NegativeZerosCountAsZeros) {
  for (int g = 2; g <= 8; ++g) {
    for (int keep = 1; keep < g; ++keep) {
      const Pattern p{keep, g};
      for (uint64_t m = 0; m < (uint64_t{1} << g); ++m) {
        if (std::popcount(m) > keep) continue;
        std::vector<float> row(g);
        for (int j = 0; j < g; ++j) row[j] = element(m, 1, j, true);
        const Tensor dense = Tensor::from_f32(row, {1, g});
        auto packed = compress_nm(dense.view(), p);
        ASSERT_TRUE(packed.ok());
        std::vector<uint32_t> values;
        std::vector<uint8_t> mask;
        test::expected_nm(dense, p, values, mask);
        ASSERT_EQ(test::all_bits(packed->values), values);
        ASSERT_EQ(test::all_bytes(packed->mask), mask);
        const auto pos = test::stored_positions(row.data(), g, g, keep);
        const std::vector<float> back = decompress(*packed).to_f32();
        for (int j = 0; j < g; ++j) {
          const bool stored = std::find(pos.begin(), pos.end(), j) != pos.end();
          ASSERT_EQ(back[j], row[j]);
          ASSERT_EQ(std::signbit(back[j]), stored && std::signbit(row[j])) << "j=" << j;
        }
      }
    }
  }
}

// Tails: rows of K = g + t, every subset of the tail's t real elements, for g <= 10.
TEST(ExhaustiveNm, EverySubsetOfEveryTail) {
  for (int g = 2; g <= 10; ++g) {
    for (int t = 1; t < g; ++t) {
      const int64_t K = g + t;
      for (int keep = 1; keep < g; ++keep) {
        const Pattern p{keep, g};
        std::vector<float> v;
        int64_t rows = 0;
        for (uint64_t m = 0; m < (uint64_t{1} << t); ++m) {
          if (std::popcount(m) > keep) continue;
          const uint64_t head = (m * 0x9E3779B97F4A7C15ull) >> 40;  // some compliant first group
          uint64_t first = 0;
          for (int j = 0, c = 0; j < g && c < keep; ++j) {
            if ((head >> j) & 1u) {
              first |= uint64_t{1} << j;
              ++c;
            }
          }
          for (int j = 0; j < g; ++j) v.push_back(element(first, rows, j, false));
          for (int j = 0; j < t; ++j) v.push_back(element(m, rows, j, false));
          ++rows;
        }
        const Tensor dense = Tensor::from_f32(v, {rows, K});
        auto packed = compress_nm(dense.view(), p);
        ASSERT_TRUE(packed.ok()) << packed.error().message();
        std::vector<uint32_t> values;
        std::vector<uint8_t> mask;
        test::expected_nm(dense, p, values, mask);
        ASSERT_EQ(test::all_bits(packed->values), values) << p.str() << " K=" << K;
        ASSERT_EQ(test::all_bytes(packed->mask), mask) << p.str() << " K=" << K;
        ASSERT_TRUE(validate(*packed, "t").ok());
        ASSERT_EQ(test::all_bits(decompress(*packed)), test::all_bits(dense));
      }
    }
  }
}

// sparse24: every row of K <= 12 elements (three groups, every tail) as a non-zero pattern.
TEST(ExhaustiveSparse24, EveryRowUpToTwelveElements) {
  for (int64_t K = 1; K <= 12; ++K) {
    std::vector<float> ok_rows;
    int64_t n_ok = 0;
    for (uint64_t m = 0; m < (uint64_t{1} << K); ++m) {
      std::vector<float> row(K);
      for (int j = 0; j < K; ++j) row[j] = element(m, static_cast<int64_t>(m), j, j % 3 == 0);
      // The oracle's first violation: the first group with more than two non-zeros.
      int64_t bad_group = -1;
      int bad_count = 0;
      for (int64_t g = 0; g * 4 < K && bad_group < 0; ++g) {
        const int t = static_cast<int>(std::min<int64_t>(4, K - g * 4));
        const int c = test::count_nonzero(row.data() + g * 4, t);
        if (c > 2) {
          bad_group = g;
          bad_count = c;
        }
      }
      const TensorView view{DType::F32, {1, K}, reinterpret_cast<const std::byte*>(row.data())};
      const auto violation = find_violation(view, Pattern{2, 4});
      ASSERT_EQ(violation.has_value(), bad_group >= 0) << "K=" << K << " mask=" << m;
      if (bad_group >= 0) {
        ASSERT_EQ(violation->group, bad_group);
        ASSERT_EQ(violation->nonzeros, bad_count);
        auto packed = compress_sparse24(view, "mlp.down");
        ASSERT_FALSE(packed.ok());
        const std::string& msg = packed.error().message();
        for (const std::string& part :
             {std::string("'mlp.down'"), std::string("row 0"), "group " + std::to_string(bad_group),
              std::to_string(bad_count) + " non-zeros", std::string("2:4")}) {
          ASSERT_NE(msg.find(part), std::string::npos) << part << " not in " << msg;
        }
        continue;
      }
      ok_rows.insert(ok_rows.end(), row.begin(), row.end());
      ++n_ok;
    }
    const Tensor dense = Tensor::from_f32(ok_rows, {n_ok, K});
    auto packed = compress_sparse24(dense.view(), "t");
    ASSERT_TRUE(packed.ok()) << packed.error().message();
    std::vector<uint32_t> values;
    std::vector<uint8_t> meta;
    test::expected_sparse24(dense, values, meta);
    ASSERT_EQ(test::all_bits(packed->values), values) << "K=" << K;
    ASSERT_EQ(test::all_bytes(packed->meta), meta) << "K=" << K;
    ASSERT_TRUE(validate(*packed, "t").ok());
    // Stored -0s come back with their sign, unstored ones as +0: compare values, then signs.
    const std::vector<float> back = decompress(*packed).to_f32();
    ASSERT_EQ(back, ok_rows) << "K=" << K;
    // nm 2:4 stores the same values and the same number of bytes.
    auto nm = compress_nm(dense.view(), Pattern{2, 4});
    ASSERT_TRUE(nm.ok());
    ASSERT_EQ(test::all_bits(nm->values), values);
    ASSERT_EQ(nm->memory_bytes(), packed->memory_bytes());
    ASSERT_EQ(decompress(*nm).to_f32(), ok_rows);
  }
}

}  // namespace
}  // namespace nmkit
