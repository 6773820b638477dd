// The fused magnitude prune + pack kernel (src/cpu/prune_kernels.h) of every tier this machine runs,
// against its scalar reference (src/ref/prune_pack_ref.cc), byte for byte, on rows of awkward
// lengths full of ties, zeros of both signs and subnormals; and the reference against the library's
// prune followed by compress_nm / compress_sparse24.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernel_table.h"
#include "nmkit/format.h"
#include "nmkit/prune.h"
#include "ref/prune_pack_ref.h"

namespace nmkit {
namespace {

struct KernelCase {
  DType dtype;
  int keep, group;
  bool sparse24;
};

std::string case_name(const KernelCase& c, int64_t K) {
  return std::string(dtype_name(c.dtype)) + " " + std::to_string(c.keep) + ":" + std::to_string(c.group) +
         (c.sparse24 ? " sparse24" : " nm") + " K " + std::to_string(K);
}

cpu::PrunePackRow row_args(const KernelCase& c, int64_t K) {
  cpu::PrunePackRow row;
  row.K = K;
  row.keep = c.keep;
  row.group = c.group;
  row.sparse24 = c.sparse24;
  row.magnitude = c.dtype == DType::F32 ? 0x7FFFFFFFu : 0x7FFFu;
  row.non_finite = c.dtype == DType::F32 ? 0x7F800000u : (c.dtype == DType::BF16 ? 0x7F80u : 0x7C00u);
  return row;
}

// Element bits from a small pool, so groups hold ties (equal magnitudes, either sign), +-0 and
// subnormals, and a tail group can keep fewer non-zeros than `keep`; `mix` picks how often.
std::vector<uint32_t> row_bits_pool(DType dtype, int64_t K, int mix, std::mt19937_64& rng) {
  const bool wide = dtype == DType::F32;
  const uint32_t sign = wide ? 0x80000000u : 0x8000u;
  const uint32_t subnormal = wide ? 0x00000003u : 0x0002u;
  const uint32_t magnitude = wide ? 0x7FFFFFFFu : 0x7FFFu;
  const uint32_t top = wide ? 0x7F7FFFFFu : (dtype == DType::BF16 ? 0x7F7Fu : 0x7BFFu);  // largest finite
  const uint32_t ties[3] = {wide ? 0x3F800000u : (dtype == DType::BF16 ? 0x3F80u : 0x3C00u),
                            wide ? 0x40000000u : (dtype == DType::BF16 ? 0x4000u : 0x4000u), subnormal};
  std::vector<uint32_t> v(static_cast<size_t>(K));
  for (auto& x : v) {
    const uint64_t roll = rng() % 8;
    if (mix == 0 || roll >= 4) {
      x = static_cast<uint32_t>(rng()) & magnitude;
      if (x > top) x = top;
    } else if (mix == 1) {
      x = roll < 2 ? 0 : ties[rng() % 3];
    } else {
      x = roll < 3 ? ties[rng() % 3] : 0;
    }
    if (rng() % 2) x |= sign;
  }
  return v;
}

std::vector<std::byte> as_bytes(const std::vector<uint32_t>& v, size_t esize) {
  std::vector<std::byte> out(v.size() * esize);
  for (size_t i = 0; i < v.size(); ++i) std::memcpy(out.data() + i * esize, &v[i], esize);
  return out;
}

std::vector<KernelCase> all_cases() {
  std::vector<KernelCase> cases;
  const std::pair<int, int> patterns[] = {{1, 2}, {1, 4}, {2, 4}, {3, 4}, {1, 8}, {4, 8},
                                          {6, 8}, {7, 8}, {1, 16}, {8, 16}, {12, 16}, {15, 16}};
  for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
    for (auto [keep, group] : patterns) cases.push_back({dtype, keep, group, false});
    cases.push_back({dtype, 2, 4, true});
  }
  return cases;
}

const int64_t kLengths[] = {1, 2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 250, 1000};

struct Packed {
  std::vector<std::byte> values;
  std::vector<uint8_t> bits;
};

constexpr size_t kGuard = 64;

// Outputs pre-filled with a byte no result has everywhere, plus guard bytes that must stay untouched.
Packed filled(size_t value_bytes, size_t bit_bytes) {
  return {std::vector<std::byte>(value_bytes + kGuard, std::byte{0xA5}), std::vector<uint8_t>(bit_bytes + kGuard, 0xA5)};
}

// The tier's kernel for the element size.
bool run_kernel(const cpu::PruneKernels& k, const cpu::PrunePackRow& args, const std::vector<std::byte>& src,
                size_t es, Packed& out) {
  if (es == 4) {
    return k.prune_pack32(args, reinterpret_cast<const uint32_t*>(src.data()),
                          reinterpret_cast<uint32_t*>(out.values.data()), out.bits.data());
  }
  return k.prune_pack16(args, reinterpret_cast<const uint16_t*>(src.data()),
                        reinterpret_cast<uint16_t*>(out.values.data()), out.bits.data());
}

TEST(PrunePackKernel, EveryTierMatchesTheReference) {
  std::mt19937_64 rng(2611);
  int tiers_run = 0;
  for (IsaTier tier : {IsaTier::Scalar, IsaTier::Avx2, IsaTier::Avx512}) {
    if (static_cast<int>(tier) > static_cast<int>(detected_tier())) continue;
    const cpu::PruneKernels& k = cpu::kernels_for(tier).prune;
    if (k.prune_pack16 == nullptr && k.prune_pack32 == nullptr) continue;
    ASSERT_TRUE(k.prune_pack16 != nullptr && k.prune_pack32 != nullptr);
    ++tiers_run;
    for (const KernelCase& c : all_cases()) {
      for (int64_t K : kLengths) {
        for (int mix = 0; mix < 3; ++mix) {
          const std::string what = std::string(tier_name(tier)) + " " + case_name(c, K) + " mix " + std::to_string(mix);
          const size_t es = dtype_size(c.dtype);
          const cpu::PrunePackRow args = row_args(c, K);
          const int64_t groups = (K + c.group - 1) / c.group;
          const size_t value_bytes = static_cast<size_t>(groups * c.keep) * es;
          const size_t bit_bytes = static_cast<size_t>((groups * c.group + 7) / 8);
          const std::vector<std::byte> src = as_bytes(row_bits_pool(c.dtype, K, mix, rng), es);
          Packed want = filled(value_bytes, bit_bytes), got = filled(value_bytes, bit_bytes);
          ASSERT_TRUE(ref_prune_pack_row(args, src.data(), es, want.values.data(), want.bits.data())) << what;
          ASSERT_TRUE(run_kernel(k, args, src, es, got)) << what;
          ASSERT_EQ(got.values, want.values) << what;
          ASSERT_EQ(got.bits, want.bits) << what;
        }
      }
    }
  }
  if (tiers_run == 0) GTEST_SKIP() << "no tier of this machine has the fused kernel";
}

// A NaN or an infinity anywhere in a row (first, middle, last element) makes every tier and the
// reference give up on the row.
TEST(PrunePackKernel, NonFiniteValuesAreRefused) {
  std::mt19937_64 rng(7);
  for (IsaTier tier : {IsaTier::Scalar, IsaTier::Avx2, IsaTier::Avx512}) {
    if (static_cast<int>(tier) > static_cast<int>(detected_tier())) continue;
    const cpu::PruneKernels& k = cpu::kernels_for(tier).prune;
    if (k.prune_pack16 == nullptr) continue;
    for (const KernelCase& c : all_cases()) {
      const int64_t K = 77;
      const size_t es = dtype_size(c.dtype);
      const cpu::PrunePackRow args = row_args(c, K);
      for (int64_t at : {int64_t{0}, int64_t{40}, K - 1}) {
        for (uint32_t bad : {args.non_finite, args.non_finite | 1u, args.magnitude}) {  // inf, NaN, NaN
          std::vector<uint32_t> v = row_bits_pool(c.dtype, K, 0, rng);
          v[static_cast<size_t>(at)] = bad;
          const std::vector<std::byte> src = as_bytes(v, es);
          Packed out = filled(static_cast<size_t>(K * 2) * es, static_cast<size_t>(K));
          const std::string what = std::string(tier_name(tier)) + " " + case_name(c, K) + " at " + std::to_string(at);
          EXPECT_FALSE(ref_prune_pack_row(args, src.data(), es, out.values.data(), out.bits.data())) << what;
          EXPECT_FALSE(run_kernel(k, args, src, es, out)) << what;
        }
      }
    }
  }
}

// The reference is the library's own two steps: prune (magnitude) then compress_nm or
// compress_sparse24, row by row.
TEST(PrunePackKernel, ReferenceIsPruneThenCompress) {
  std::mt19937_64 rng(44);
  for (const KernelCase& c : all_cases()) {
    for (int64_t K : {int64_t{5}, int64_t{33}, int64_t{100}}) {
      const int64_t rows = 3;
      const size_t es = dtype_size(c.dtype);
      std::vector<uint32_t> all;
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<uint32_t> row = row_bits_pool(c.dtype, K, static_cast<int>(r), rng);
        all.insert(all.end(), row.begin(), row.end());
      }
      std::vector<std::byte> bytes = as_bytes(all, es);
      const TensorView w{c.dtype, {rows, K}, bytes.data()};
      const Pattern pattern{c.keep, c.group};
      auto pruned = prune(w, pattern, PruneMethod::Magnitude, {});
      ASSERT_TRUE(pruned.ok()) << pruned.error().message();
      std::vector<std::byte> values;
      std::vector<uint8_t> bits;
      size_t row_values = 0, row_bits = 0;
      if (c.sparse24) {
        auto packed = compress_sparse24(pruned->pruned.view());
        ASSERT_TRUE(packed.ok());
        values.assign(packed->values.data(), packed->values.data() + packed->values.nbytes());
        bits.assign(packed->meta.as<uint8_t>(), packed->meta.as<uint8_t>() + packed->meta.nbytes());
      } else {
        auto packed = compress_nm(pruned->pruned.view(), pattern);
        ASSERT_TRUE(packed.ok());
        values.assign(packed->values.data(), packed->values.data() + packed->values.nbytes());
        bits.assign(packed->mask.as<uint8_t>(), packed->mask.as<uint8_t>() + packed->mask.nbytes());
      }
      row_values = values.size() / rows;
      row_bits = bits.size() / rows;
      const cpu::PrunePackRow args = row_args(c, K);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<std::byte> v(row_values);
        std::vector<uint8_t> b(row_bits);
        ASSERT_TRUE(ref_prune_pack_row(args, bytes.data() + static_cast<size_t>(r * K) * es, es, v.data(), b.data()));
        const std::string what = case_name(c, K) + " row " + std::to_string(r);
        EXPECT_EQ(0, std::memcmp(v.data(), values.data() + r * row_values, row_values)) << what;
        EXPECT_EQ(0, std::memcmp(b.data(), bits.data() + r * row_bits, row_bits)) << what;
      }
    }
  }
}

}  // namespace
}  // namespace nmkit
