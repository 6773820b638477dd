// Any keep:group as values plus a bitmask (docs/design.md 4.3): exactly `keep` value slots and `keep`
// mask bits per group, so a kernel can seek to any group without a prefix sum.
#include <algorithm>
#include <bit>
#include <cstring>

#include "format/elements.h"
#include "nmkit/format.h"

namespace nmkit {
namespace {

using format_detail::all_fields_hold;
using format_detail::check_dense;
using format_detail::fill_positions;
using format_detail::magnitude_bits_mask;
using format_detail::name_prefix;
using format_detail::nonzero_bits;

inline bool mask_bit(const uint8_t* row, int64_t k) { return ((row[k >> 3] >> (k & 7)) & 1u) != 0; }

// Row r of out from its dense row (out.K elements of out's dtype): each group's non-zeros, padded
// with the lowest zero positions to `keep` (section 4.3), values in order and their mask bits.
template <class E>
std::optional<Violation> pack_row(const std::byte* row, int64_t r, NMPacked& out) {
  const E mag = static_cast<E>(magnitude_bits_mask(out.dtype()));
  const Pattern p = out.pattern;
  const int64_t K = out.K, groups = out.groups(), stride = out.mask_stride();
  std::byte* vals = out.values.data() + static_cast<size_t>(r * groups * p.keep) * sizeof(E);
  uint8_t* mask = out.mask.as<uint8_t>() + r * stride;
  if (stride > 0) std::memset(mask, 0, stride);
  auto one_group = [&](int64_t g) -> std::optional<Violation> {
    const int64_t k0 = g * p.group;
    const int n = static_cast<int>(std::min<int64_t>(p.group, K - k0));
    const std::byte* src = row + k0 * sizeof(E);
    int count = 0;
    const uint64_t nz = nonzero_bits<E>(src, n, mag, count);
    if (count > p.keep) return Violation{r, g, count};
    uint64_t chosen = fill_positions(nz, count, p.group, p.keep);
    for (int64_t s = 0; chosen != 0; ++s, chosen &= chosen - 1) {
      const int j = std::countr_zero(chosen);
      E v{0};  // padding positions of a tail group hold +0
      if (j < n) std::memcpy(&v, src + j * sizeof(E), sizeof(E));
      std::memcpy(vals + (g * p.keep + s) * sizeof(E), &v, sizeof(E));
      const int64_t k = k0 + j;
      mask[k >> 3] = static_cast<uint8_t>(mask[k >> 3] | (1u << (k & 7)));
    }
    return std::nullopt;
  };
  // Whole words: the non-zero bits are the word's mask bits, one little-endian store.
  return format_detail::pack_row_by_words<E>(row, K, groups, p, mag, vals, one_group,
                                             [&](int64_t w, uint64_t bits) { std::memcpy(mask + w * 8, &bits, 8); });
}

template <class E>
Status pack_rows(const TensorView& dense, NMPacked& out, std::string_view name) {
  const int64_t K = out.K;
  const auto violation = format_detail::scan_rows(
      out.rows(), K,
      [&](int64_t r0, int64_t r1, const std::atomic<int64_t>& stop) -> std::optional<Violation> {
        for (int64_t r = r0; r < r1 && r < stop.load(std::memory_order_relaxed); ++r) {
          if (auto v = pack_row<E>(dense.data + static_cast<size_t>(r * K) * sizeof(E), r, out)) return v;
        }
        return std::nullopt;
      });
  if (violation) return format_detail::violation_error(name, *violation, out.pattern);
  return ok_status();
}

}  // namespace

NMPacked empty_nm(DType dtype, int64_t rows, int64_t K, Pattern pattern) {
  NMPacked out;
  out.pattern = pattern;
  out.K = K;
  out.values = Tensor::empty(dtype, {rows, out.groups() * pattern.keep});
  out.mask = Tensor::empty(DType::U8, {rows, out.mask_stride()});
  return out;
}

std::optional<Violation> compress_row(const std::byte* row, int64_t r, NMPacked& out) {
  return dtype_size(out.dtype()) == 4 ? pack_row<uint32_t>(row, r, out) : pack_row<uint16_t>(row, r, out);
}

Result<NMPacked> compress_nm(const TensorView& dense, Pattern pattern, std::string_view name) {
  NMKIT_TRY(check_dense(dense, name));
  auto checked = Pattern::make(pattern.keep, pattern.group);
  if (!checked.ok()) return checked.error().with_context(name_prefix(name));
  NMPacked out = empty_nm(dense.dtype, dense.rows(), dense.cols(), pattern);
  if (dtype_size(dense.dtype) == 4) {
    NMKIT_TRY(pack_rows<uint32_t>(dense, out, name));
  } else {
    NMKIT_TRY(pack_rows<uint16_t>(dense, out, name));
  }
  return out;
}

Tensor decompress(const NMPacked& packed) {
  const size_t es = dtype_size(packed.dtype());
  const Pattern p = packed.pattern;
  Tensor dense = Tensor::empty(packed.dtype(), {packed.rows(), packed.K});
  const int64_t K = packed.K, groups = packed.groups(), stride = packed.mask_stride();
  // As for sparse24: an empty row writes nothing, so [2^48, 0] costs O(1), not 2^48 steps.
  if (K == 0) return dense;
  parallel_for(packed.rows(), std::max<int64_t>(1, 65536 / std::max<int64_t>(1, K)),
               [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* mask = packed.mask.as<uint8_t>() + r * stride;
      const std::byte* vals = packed.values.data() + static_cast<size_t>(r * groups * p.keep) * es;
      std::byte* row = dense.data() + static_cast<size_t>(r * K) * es;
      if (K > 0) std::memset(row, 0, static_cast<size_t>(K) * es);
      for (int64_t g = 0; g < groups; ++g) {
        uint64_t bits = format_detail::read_bits(mask, stride, g * p.group, p.group);
        for (int64_t slot = g * p.keep; bits != 0; ++slot, bits &= bits - 1) {
          const int64_t k = g * p.group + std::countr_zero(bits);
          if (k < K) std::memcpy(row + k * es, vals + slot * es, es);
        }
      }
    }
  });
  return dense;
}

Status validate(const NMPacked& packed, std::string_view name) {
  const Pattern p = packed.pattern;
  std::string pre = name_prefix(name) + "nm: ";
  if (auto checked = Pattern::make(p.keep, p.group); !checked.ok()) {
    return checked.error().with_context(pre);
  }
  pre = name_prefix(name) + "nm " + p.str() + ": ";
  if (!is_prunable(packed.dtype())) {
    return Error(pre + "dtype " + std::string(dtype_name(packed.dtype())) +
                 " is not F32, F16 or BF16");
  }
  if (packed.K < 0) return Error(pre + "negative K " + std::to_string(packed.K));
  const int64_t rows = packed.rows();
  const int64_t K = packed.K, groups = packed.groups(), stride = packed.mask_stride();
  const Shape values_shape{rows, groups * p.keep};
  if (packed.values.shape() != values_shape) {
    return Error(pre + "values are " + shape_str(packed.values.shape()) + ", expected " +
                 shape_str(values_shape) + " for K " + std::to_string(K));
  }
  const Shape mask_shape{rows, stride};
  if (packed.mask.dtype() != DType::U8 || packed.mask.shape() != mask_shape) {
    return Error(pre + "mask is " + std::string(dtype_name(packed.mask.dtype())) + " " +
                 shape_str(packed.mask.shape()) + ", expected U8 " + shape_str(mask_shape));
  }
  const size_t es = dtype_size(packed.dtype());
  const uint64_t mag = magnitude_bits_mask(packed.dtype());
  const int64_t K_pad = packed.K_pad();
  // Rows without groups have nothing to check: [2^48, 0] is valid at once, and the loop below runs
  // rows * K_pad <= 8 * mask bytes steps.
  if (groups == 0) return ok_status();
  // Only groups reaching past K hold padding columns; the others need only their bit count.
  const int64_t first_tail = K / p.group;
  return format_detail::check_rows(rows, K_pad, [&](int64_t r) -> std::optional<std::string> {
    const uint8_t* mask = packed.mask.as<uint8_t>() + r * stride;
    const std::byte* vals = packed.values.data() + static_cast<size_t>(r * groups * p.keep) * es;
    const auto at = [&](int64_t g) { return "row " + std::to_string(r) + ", group " + std::to_string(g); };
    // Whole 64-bit words of groups before the tail, where the group divides 64: every field's count
    // at once; the per-group loop below then starts at the first word that fails (its message).
    int64_t g = 0;
    if (64 % p.group == 0) {
      const int per_word = 64 / p.group;
      for (; g + per_word <= first_tail; g += per_word) {
        uint64_t word;
        std::memcpy(&word, mask + g * p.group / 8, 8);
        if (!all_fields_hold(word, p.group, p.keep)) break;
      }
    }
    for (; g < groups; ++g) {
      uint64_t bits = format_detail::read_bits(mask, stride, g * p.group, p.group);
      const int count = format_detail::count_bits(bits);
      for (int slot = 0; g >= first_tail && slot < p.keep && bits != 0; ++slot, bits &= bits - 1) {
        const int64_t k = g * p.group + std::countr_zero(bits);
        if (k >= K && (format_detail::load_bits(vals + (g * p.keep + slot) * es, es) & mag) != 0) {
          return pre + at(g) + " stores a non-zero value at padding column " + std::to_string(k);
        }
      }
      if (count != p.keep) {
        return pre + at(g) + " has " + std::to_string(count) + " mask bits set, expected " + std::to_string(p.keep);
      }
    }
    for (int64_t k = K_pad; k < stride * 8; ++k) {
      if (mask_bit(mask, k)) {
        return pre + "row " + std::to_string(r) + " has mask bit " + std::to_string(k) +
               " set beyond the padded width " + std::to_string(K_pad);
      }
    }
    return std::nullopt;
  });
}

}  // namespace nmkit
