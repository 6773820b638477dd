// Shared by the format code: "non-zero" on raw bits, the fill rule, input checks, and a row-
// parallel driver that reports the first violation in row-major order whatever the thread count.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "nmkit/dtype.h"
#include "nmkit/format.h"
#include "nmkit/pattern.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"
#include "nmkit/threads.h"

namespace nmkit::format_detail {

// A value is non-zero when it compares != 0: for floating types every bit but the sign (so -0 is
// zero and NaN is non-zero), for integer types any bit.
inline uint64_t magnitude_bits_mask(DType dtype) {
  switch (dtype) {
    case DType::F64: return 0x7FFFFFFFFFFFFFFFull;
    case DType::F32: return 0x7FFFFFFFull;
    case DType::F16:
    case DType::BF16: return 0x7FFFull;
    case DType::F8_E4M3:
    case DType::F8_E5M2: return 0x7Full;
    default: return ~uint64_t{0};
  }
}

inline uint64_t load_bits(const std::byte* p, size_t esize) {
  switch (esize) {
    case 1: return static_cast<uint64_t>(*p);
    case 2: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    default: { uint64_t v; std::memcpy(&v, p, 8); return v; }
  }
}

// A sparse24 metadata nibble idx0 | idx1 << 2 with idx0 < idx1: 0x4, 0x8, 0x9, 0xC, 0xD or 0xE.
inline bool valid_sparse24_nibble(unsigned nibble) {
  return nibble == 0x4 || nibble == 0x8 || nibble == 0x9 || nibble == 0xC || nibble == 0xD || nibble == 0xE;
}

// Whether all 16 nibbles of word are valid sparse24 nibbles: idx0 = bits 0-1 below idx1 = bits 2-3.
// Per nibble (idx1 | 4) - idx0 is 4 + idx1 - idx0, in 1..7 (no borrow between nibbles), and
// idx1 > idx0 exactly when that is 5, 6 or 7: bit 2 set and bit 0 or 1 set.
inline bool all_sparse24_nibbles_valid(uint64_t word) {
  const uint64_t low = word & 0x3333333333333333ull;
  const uint64_t high = (word >> 2) & 0x3333333333333333ull;
  const uint64_t d = (high | 0x4444444444444444ull) - low;
  return ((d >> 2) & (d | (d >> 1)) & 0x1111111111111111ull) == 0x1111111111111111ull;
}

// The fill rule of docs/design.md 4.2/4.3: the group's non-zero positions, then its lowest-index zero
// positions (padding positions of a tail group count as zeros) until `keep` positions are chosen.
// `nonzero` has bit j set for a non-zero at group position j < group, `count` of them, <= keep.
inline uint64_t fill_positions(uint64_t nonzero, int count, int group, int keep) {
  const uint64_t all = group == 64 ? ~uint64_t{0} : (uint64_t{1} << group) - 1;
  uint64_t chosen = nonzero;
  uint64_t zeros = all & ~nonzero;
  for (int c = count; c < keep; ++c) {
    chosen |= zeros & (~zeros + 1);  // lowest zero position
    zeros &= zeros - 1;
  }
  return chosen;
}

// Whether every `group`-bit field of word (group a power of two, 2..64) has exactly `keep` bits set:
// a popcount per field by the usual halving sums, compared with keep in every field at once.
inline bool all_fields_hold(uint64_t x, int group, int keep) {
  if (group == 1) return x == (keep == 1 ? ~uint64_t{0} : 0);
  x = x - ((x >> 1) & 0x5555555555555555ull);
  uint64_t ones = 0x5555555555555555ull;
  if (group >= 4) {
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    ones = 0x1111111111111111ull;
  }
  if (group >= 8) {
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    ones = 0x0101010101010101ull;
  }
  if (group >= 16) {
    x = (x + (x >> 8)) & 0x00FF00FF00FF00FFull;
    ones = 0x0001000100010001ull;
  }
  if (group >= 32) {
    x = (x + (x >> 16)) & 0x0000FFFF0000FFFFull;
    ones = 0x0000000100000001ull;
  }
  if (group == 64) {
    x = (x + (x >> 32)) & 0xFFFFFFFFull;
    ones = 1;
  }
  return x == static_cast<uint64_t>(keep) * ones;
}

// Bit j set when element j of the 64 at `p` is non-zero (its bits & mag_mask != 0), E 16- or
// 32-bit: a machine word of elements at a time (4 or 2 lanes), each lane's "any bit set" carried
// into its top bit, then the top bits gathered by one multiply (16-bit lanes: the bits at 0, 16,
// 32, 48 land at 48-51 with no overlapping partial products) or a shift (32-bit lanes).
template <class E>
inline uint64_t word_nonzero_bits(const std::byte* p, E mag_mask) {
  static_assert(sizeof(E) == 2 || sizeof(E) == 4);
  constexpr int lanes = 8 / sizeof(E);
  constexpr int lane_bits = 8 * sizeof(E);
  constexpr uint64_t high = sizeof(E) == 2 ? 0x8000800080008000ull : 0x8000000080000000ull;
  constexpr uint64_t low = ~high;
  uint64_t mag = 0;
  for (int l = 0; l < lanes; ++l) mag |= static_cast<uint64_t>(mag_mask) << (l * lane_bits);
  uint64_t bits = 0;
  for (int w = 0; w < 64 / lanes; ++w) {
    uint64_t x;
    std::memcpy(&x, p + w * 8, 8);
    x &= mag;
    const uint64_t top = ((((x & low) + low) | x) & high) >> (lane_bits - 1);  // bit 0 of each non-zero lane
    const uint64_t gathered = sizeof(E) == 2 ? (top * 0x0001000200040008ull) >> 48 & 0xFu : (top | (top >> 31)) & 0x3u;
    bits |= gathered << (w * lanes);
  }
  return bits;
}

// One row of a compression (compress_nm, compress_sparse24) by whole 64-element words where the
// group divides 64: when every group of a word holds exactly `keep` non-zeros (what pruning
// leaves), `whole_word(w, nonzero_bits)` stores word w's mask or meta and its non-zeros are copied
// in order to the row's values from group w * 64 / group on; any other word, and the groups after
// the last whole one, go through `one_group(g)`, which may return a violation.
template <class E, class OneGroup, class WholeWord>
std::optional<Violation> pack_row_by_words(const std::byte* row, int64_t K, int64_t groups, Pattern p, E mag_mask,
                                           std::byte* values, const OneGroup& one_group,
                                           const WholeWord& whole_word) {
  int64_t g0 = 0;
  if (64 % p.group == 0) {
    const int64_t per_word = 64 / p.group;
    for (int64_t w = 0; w < K / 64; ++w, g0 += per_word) {
      const std::byte* src = row + w * 64 * sizeof(E);
      uint64_t bits = word_nonzero_bits<E>(src, mag_mask);
      if (!all_fields_hold(bits, p.group, p.keep)) {
        for (int64_t g = g0; g < g0 + per_word; ++g) {
          if (auto v = one_group(g)) return v;
        }
        continue;
      }
      whole_word(w, bits);
      std::byte* dst = values + static_cast<size_t>(g0 * p.keep) * sizeof(E);
      for (; bits != 0; bits &= bits - 1, dst += sizeof(E)) {
        std::memcpy(dst, src + std::countr_zero(bits) * sizeof(E), sizeof(E));
      }
    }
  }
  for (int64_t g = g0; g < groups; ++g) {
    if (auto v = one_group(g)) return v;
  }
  return std::nullopt;
}

// The number of set bits, without a library call (std::popcount is one without -mpopcnt).
inline int count_bits(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return static_cast<int>((x * 0x0101010101010101ull) >> 56);
}

// Bit j set when element j of the n real elements at `p` is non-zero; `count` gets their number
// (counted here: without -mpopcnt, std::popcount is a library call).
template <class E>
inline uint64_t nonzero_bits(const std::byte* p, int n, E mag_mask, int& count) {
  uint64_t bits = 0;
  int c = 0;
  for (int j = 0; j < n; ++j) {
    E v;
    std::memcpy(&v, p + j * sizeof(E), sizeof(E));
    const bool nz = (v & mag_mask) != 0;
    bits |= static_cast<uint64_t>(nz) << j;
    c += nz ? 1 : 0;
  }
  count = c;
  return bits;
}

// `width` (<= 64) bits of a LSB-first bit row starting at bit `pos`; `row_bytes` bounds the read.
inline uint64_t read_bits(const uint8_t* row, int64_t row_bytes, int64_t pos, int width) {
  const int64_t byte = pos >> 3;
  const int shift = static_cast<int>(pos & 7);
  uint64_t lo = 0;
  std::memcpy(&lo, row + byte, static_cast<size_t>(std::min<int64_t>(8, row_bytes - byte)));
  uint64_t bits = lo >> shift;
  if (shift + width > 64) bits |= static_cast<uint64_t>(row[byte + 8]) << (64 - shift);
  return width == 64 ? bits : bits & ((uint64_t{1} << width) - 1);
}

inline std::string name_prefix(std::string_view name) {
  return name.empty() ? std::string() : "tensor '" + std::string(name) + "': ";
}

// Compression input: a 2-D tensor of a prunable dtype with data.
inline Status check_dense(const TensorView& dense, std::string_view name) {
  if (dense.shape.size() != 2 || dense.shape[0] < 0 || dense.shape[1] < 0) {
    return Error(name_prefix(name) + "compression needs a 2-D tensor [rows, K], got shape " +
                 shape_str(dense.shape)).classified(ErrorCode::InvalidArgument);
  }
  if (!is_prunable(dense.dtype)) {
    return Error(name_prefix(name) + "dtype " + std::string(dtype_name(dense.dtype)) +
                 " cannot be compressed (expected F32, F16 or BF16)").classified(ErrorCode::Unsupported);
  }
  if (dense.data == nullptr && dense.numel() > 0) return Error(name_prefix(name) + "has no data");
  return ok_status();
}

inline Error violation_error(std::string_view name, const Violation& v, Pattern pattern) {
  return Error(name_prefix(name) + "row " + std::to_string(v.row) + ", group " +
               std::to_string(v.group) + " has " + std::to_string(v.nonzeros) +
               " non-zeros, more than pattern " + pattern.str() + " allows").classified(ErrorCode::InvalidValue);
}

// Runs scan(r0, r1, stop_row) over rows in parallel; scan returns the first finding (a type with a
// `row`) of its rows, in order, and may stop early once a row reaches stop_row. Returns the first
// finding overall, in row-major order whatever the thread count.
template <class Finding, class Scan>
std::optional<Finding> first_in_rows(int64_t rows, int64_t K, const Scan& scan) {
  std::mutex mutex;
  std::optional<Finding> first;
  std::atomic<int64_t> stop_row{rows};
  // No columns, no groups: nothing can violate, and [2^48, 0] must not loop over its rows.
  if (rows <= 0 || K <= 0) return first;
  // ~64K elements per grain: big enough to amortise the hand-off, small enough to balance.
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, K));
  parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    std::optional<Finding> v = scan(r0, r1, stop_row);
    if (!v) return;
    std::lock_guard lock(mutex);
    const int64_t row = v->row;
    if (!first || row < first->row) first = std::move(v);
    int64_t cur = stop_row.load();
    while (row < cur && !stop_row.compare_exchange_weak(cur, row)) {
    }
  });
  return first;
}

template <class Scan>
std::optional<Violation> scan_rows(int64_t rows, int64_t K, const Scan& scan) {
  return first_in_rows<Violation>(rows, K, scan);
}

// A packed tensor's first invalid row and what is wrong with it (validate's row-parallel check).
struct RowError {
  int64_t row = 0;
  std::string message;
};

// Runs check(r) -> std::optional<std::string> on every row in parallel; the message of the first
// failing row, as an Error, or ok.
template <class Check>
Status check_rows(int64_t rows, int64_t K, const Check& check) {
  const auto bad = first_in_rows<RowError>(
      rows, K, [&](int64_t r0, int64_t r1, const std::atomic<int64_t>& stop) -> std::optional<RowError> {
        for (int64_t r = r0; r < r1 && r < stop.load(std::memory_order_relaxed); ++r) {
          if (std::optional<std::string> message = check(r)) return RowError{r, std::move(*message)};
        }
        return std::nullopt;
      });
  if (bad) return Error(bad->message);
  return ok_status();
}

}  // namespace nmkit::format_detail
