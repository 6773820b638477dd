// Canonical 2:4 (docs/design.md 4.2): two values per group of four plus a 4-bit nibble idx0 | idx1 << 2.
#include <algorithm>
#include <bit>
#include <cstring>

#include "format/elements.h"
#include "nmkit/format.h"

namespace nmkit {
namespace {

using format_detail::check_dense;
using format_detail::fill_positions;
using format_detail::magnitude_bits_mask;
using format_detail::name_prefix;
using format_detail::nonzero_bits;

const Pattern k24{2, 4};

// The nibble (first position | second position << 2) of a group whose bits hold exactly two
// positions; 0 for the other 10 masks, which the word path never looks up.
constexpr uint8_t kPairNibble[16] = {0, 0, 0, 0x4, 0, 0x8, 0x9, 0, 0, 0xC, 0xD, 0, 0xE, 0, 0, 0};

// Row r of out from its dense row (out.K elements of out's dtype): each group's non-zeros, padded
// with the lowest zero positions to two, and its nibble.
template <class E>
std::optional<Violation> pack_row(const std::byte* row, int64_t r, Sparse24& out) {
  const E mag = static_cast<E>(magnitude_bits_mask(out.dtype()));
  const int64_t K = out.K, groups = out.K_pad() / 4, stride = out.meta_stride();
  std::byte* vals = out.values.data() + static_cast<size_t>(r * groups * 2) * sizeof(E);
  uint8_t* meta = out.meta.as<uint8_t>() + r * stride;
  if (stride > 0) std::memset(meta, 0, stride);
  auto one_group = [&](int64_t g) -> std::optional<Violation> {
    const int n = static_cast<int>(std::min<int64_t>(4, K - g * 4));
    const std::byte* src = row + g * 4 * sizeof(E);
    int count = 0;
    const uint64_t nz = nonzero_bits<E>(src, n, mag, count);
    if (count > 2) return Violation{r, g, count};
    const uint64_t chosen = fill_positions(nz, count, 4, 2);
    const int idx0 = std::countr_zero(chosen);
    const int idx1 = std::countr_zero(chosen & (chosen - 1));
    const int idx[2] = {idx0, idx1};
    for (int s = 0; s < 2; ++s) {
      E v{0};  // padding positions of a tail group hold +0
      if (idx[s] < n) std::memcpy(&v, src + idx[s] * sizeof(E), sizeof(E));
      std::memcpy(vals + (g * 2 + s) * sizeof(E), &v, sizeof(E));
    }
    const auto nibble = static_cast<uint8_t>(idx0 | (idx1 << 2));
    meta[g / 2] = static_cast<uint8_t>(meta[g / 2] | (nibble << ((g & 1) * 4)));
    return std::nullopt;
  };
  // Whole words: the 16 nibbles from a table of each group's bits, one little-endian store.
  auto whole_word = [&](int64_t w, uint64_t bits) {
    uint64_t nibbles = 0;
    for (int g = 0; g < 16; ++g) nibbles |= uint64_t{kPairNibble[(bits >> (4 * g)) & 15u]} << (4 * g);
    std::memcpy(meta + w * 8, &nibbles, 8);
  };
  return format_detail::pack_row_by_words<E>(row, K, groups, k24, mag, vals, one_group, whole_word);
}

template <class E>
Status pack_rows(const TensorView& dense, Sparse24& out, std::string_view name) {
  const int64_t K = out.K;
  const auto violation = format_detail::scan_rows(
      out.rows(), K,
      [&](int64_t r0, int64_t r1, const std::atomic<int64_t>& stop) -> std::optional<Violation> {
        for (int64_t r = r0; r < r1 && r < stop.load(std::memory_order_relaxed); ++r) {
          if (auto v = pack_row<E>(dense.data + static_cast<size_t>(r * K) * sizeof(E), r, out)) return v;
        }
        return std::nullopt;
      });
  if (violation) return format_detail::violation_error(name, *violation, k24);
  return ok_status();
}

}  // namespace

Sparse24 empty_sparse24(DType dtype, int64_t rows, int64_t K) {
  Sparse24 out;
  out.K = K;
  out.values = Tensor::empty(dtype, {rows, out.K_pad() / 2});
  out.meta = Tensor::empty(DType::U8, {rows, out.meta_stride()});
  return out;
}

std::optional<Violation> compress_row(const std::byte* row, int64_t r, Sparse24& out) {
  return dtype_size(out.dtype()) == 4 ? pack_row<uint32_t>(row, r, out) : pack_row<uint16_t>(row, r, out);
}

Result<Sparse24> compress_sparse24(const TensorView& dense, std::string_view name) {
  NMKIT_TRY(check_dense(dense, name));
  Sparse24 out = empty_sparse24(dense.dtype, dense.rows(), dense.cols());
  if (dtype_size(dense.dtype) == 4) {
    NMKIT_TRY(pack_rows<uint32_t>(dense, out, name));
  } else {
    NMKIT_TRY(pack_rows<uint16_t>(dense, out, name));
  }
  return out;
}

Tensor decompress(const Sparse24& packed) {
  const size_t es = dtype_size(packed.dtype());
  Tensor dense = Tensor::empty(packed.dtype(), {packed.rows(), packed.K});
  const int64_t K = packed.K, groups = packed.K_pad() / 4, stride = packed.meta_stride();
  // An empty row has nothing to write: [2^48, 0] must not loop over 2^48 rows (the work below is
  // then bounded by the bytes of the parts, rows * K_pad/2 values).
  if (K == 0) return dense;
  parallel_for(packed.rows(), std::max<int64_t>(1, 65536 / std::max<int64_t>(1, K)),
               [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* meta = packed.meta.as<uint8_t>() + r * stride;
      const std::byte* vals = packed.values.data() + static_cast<size_t>(r * groups * 2) * es;
      std::byte* row = dense.data() + static_cast<size_t>(r * K) * es;
      if (K > 0) std::memset(row, 0, static_cast<size_t>(K) * es);
      for (int64_t g = 0; g < groups; ++g) {
        const unsigned nibble = (meta[g / 2] >> ((g & 1) * 4)) & 0xFu;
        const int64_t k[2] = {g * 4 + (nibble & 3u), g * 4 + (nibble >> 2)};
        for (int s = 0; s < 2; ++s) {
          if (k[s] < K) std::memcpy(row + k[s] * es, vals + (g * 2 + s) * es, es);
        }
      }
    }
  });
  return dense;
}

Status validate(const Sparse24& packed, std::string_view name) {
  const std::string pre = name_prefix(name) + "sparse24: ";
  if (!is_prunable(packed.dtype())) {
    return Error(pre + "dtype " + std::string(dtype_name(packed.dtype())) +
                 " is not F32, F16 or BF16");
  }
  if (packed.K < 0) return Error(pre + "negative K " + std::to_string(packed.K));
  const int64_t rows = packed.rows();
  const Shape values_shape{rows, packed.K_pad() / 2};
  if (packed.values.shape() != values_shape) {
    return Error(pre + "values are " + shape_str(packed.values.shape()) + ", expected " +
                 shape_str(values_shape) + " for K " + std::to_string(packed.K));
  }
  const Shape meta_shape{rows, packed.meta_stride()};
  if (packed.meta.dtype() != DType::U8 || packed.meta.shape() != meta_shape) {
    return Error(pre + "meta is " + std::string(dtype_name(packed.meta.dtype())) + " " +
                 shape_str(packed.meta.shape()) + ", expected U8 " + shape_str(meta_shape));
  }
  const size_t es = dtype_size(packed.dtype());
  const uint64_t mag = magnitude_bits_mask(packed.dtype());
  const int64_t K = packed.K, groups = packed.K_pad() / 4, stride = packed.meta_stride();
  // Rows without groups have nothing to check: [2^48, 0] is valid at once, and the loop below runs
  // rows * groups <= 2 * meta bytes steps.
  if (groups == 0) return ok_status();
  // Only groups reaching past K hold padding columns; the ones before need only valid nibbles.
  const int64_t first_tail = K / 4;
  return format_detail::check_rows(rows, K, [&](int64_t r) -> std::optional<std::string> {
    const uint8_t* meta = packed.meta.as<uint8_t>() + r * stride;
    const std::byte* vals = packed.values.data() + static_cast<size_t>(r * groups * 2) * es;
    // 16 nibbles per 64-bit word at once; the per-group loop starts at the first word that fails
    // (its message) or after the last whole word.
    int64_t g = 0;
    for (; g + 16 <= first_tail; g += 16) {
      uint64_t word;
      std::memcpy(&word, meta + g / 2, 8);
      if (!format_detail::all_sparse24_nibbles_valid(word)) break;
    }
    for (; g < groups; ++g) {
      const unsigned nibble = (meta[g / 2] >> ((g & 1) * 4)) & 0xFu;
      if (!format_detail::valid_sparse24_nibble(nibble)) {
        return pre + "row " + std::to_string(r) + ", group " + std::to_string(g) +
               " has invalid metadata nibble " + std::to_string(nibble);
      }
      const int64_t k[2] = {g * 4 + (nibble & 3u), g * 4 + (nibble >> 2)};
      for (int s = 0; s < 2; ++s) {
        if (k[s] >= K && (format_detail::load_bits(vals + (g * 2 + s) * es, es) & mag) != 0) {
          return pre + "row " + std::to_string(r) + ", group " + std::to_string(g) +
                 " stores a non-zero value at padding column " + std::to_string(k[s]);
        }
      }
    }
    if (groups % 2 == 1 && (meta[stride - 1] >> 4) != 0) {
      return pre + "row " + std::to_string(r) + " has a non-zero unused high nibble " +
             std::to_string(meta[stride - 1] >> 4) + " in its last metadata byte";
    }
    return std::nullopt;
  });
}

}  // namespace nmkit
