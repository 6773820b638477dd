// sparse24 <-> CUTLASS's SM80 sparse layout (docs/design.md sections 7 and 14): the values are the
// same bytes; the metadata is the same words, moved to where ldmatrix reads them.
#include "nmkit/cutlass_sm80.h"

#include <cstring>
#include <string>

#include "format/elements.h"

namespace nmkit {
namespace {

using format_detail::name_prefix;

constexpr unsigned kPaddingNibble = 0x4;  // positions 0 and 1: what the fill rule names for no non-zero


bool sm80_dtype(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::I8 || dtype == DType::F8_E4M3;
}

// Calls visit(r, c, offset) for every metadata word of the layout, offset in words.
template <class Visit>
void for_each_word(const CutlassSm80& layout, Visit&& visit) {
  const int64_t rows_pad = layout.rows_pad();
  const int64_t cols = layout.K_pad() / layout.meta_bits();  // 4 bits of meta per 4 K
  for (int64_t r = 0; r < rows_pad; ++r) {
    for (int64_t c = 0; c < cols; ++c) visit(r, c, cutlass_sm80_meta_offset(r, c, rows_pad, layout.meta_bits()));
  }
}

std::string place(int64_t r, int64_t g) {
  return "row " + std::to_string(r) + ", group " + std::to_string(g);
}

}  // namespace

CutlassSm80 cutlass_sm80_geometry(DType dtype, int64_t rows, int64_t K) {
  CutlassSm80 layout;
  layout.rows = rows;
  layout.K = K;
  layout.values = Tensor::empty(dtype, {0, 0});  // the dtype decides the sizes
  return layout;
}

int64_t cutlass_sm80_meta_offset(int64_t r, int64_t c, int64_t rows_pad, int meta_bits) {
  const int64_t G = meta_bits == 16 ? 32 : 16;
  const int64_t I = meta_bits == 16 ? 4 : 2;
  const int64_t rr = (r / G) * G + (r % 8) * I + (r % G) / 8;
  return 2 * rows_pad * (c >> 1) + 4 * (rr >> 1) + 2 * (c & 1) + (rr & 1);
}

Result<CutlassSm80> to_cutlass_sm80(const Sparse24& packed, std::string_view name) {
  const std::string pre = name_prefix(name) + "cutlass_sm80: ";
  if (!sm80_dtype(packed.dtype())) {
    return Error(pre + "dtype " + std::string(dtype_name(packed.dtype())) +
                 " is not F16, BF16, I8 or F8_E4M3 (the 2:4 types of mma.sp; F32 runs as tf32 1:2)");
  }
  CutlassSm80 out = cutlass_sm80_geometry(packed.dtype(), packed.rows(), packed.K);
  const size_t es = dtype_size(packed.dtype());
  const int64_t groups = packed.K_pad() / 4, src_half = groups * 2, dst_half = out.K_pad() / 2;
  out.values = Tensor::zeros(packed.dtype(), {out.rows_pad(), dst_half});
  out.meta = Tensor::empty(DType::U8, {out.rows_pad(), out.meta_row_bytes()});
  for (int64_t r = 0; r < out.rows; ++r) {
    std::memcpy(out.values.data() + static_cast<size_t>(r * dst_half) * es,
                packed.values.data() + static_cast<size_t>(r * src_half) * es, static_cast<size_t>(src_half) * es);
  }
  // The sparse24 nibbles of a row, padding groups added; words are read little-endian from these.
  const int64_t word_bytes = out.meta_bits() / 8;
  std::vector<uint8_t> row_nibbles(static_cast<size_t>(out.meta_row_bytes()));
  int64_t row_loaded = -1;
  Status status = ok_status();
  for_each_word(out, [&](int64_t r, int64_t c, int64_t offset) {
    if (r != row_loaded) {
      std::memset(row_nibbles.data(), kPaddingNibble | kPaddingNibble << 4, row_nibbles.size());
      if (r < out.rows) {
        const uint8_t* meta = packed.meta.as<uint8_t>() + r * packed.meta_stride();
        for (int64_t g = 0; g < groups; ++g) {
          const unsigned nibble = (meta[g / 2] >> ((g & 1) * 4)) & 0xFu;
          if (!format_detail::valid_sparse24_nibble(nibble) && status) {
            status = Error(pre + place(r, g) + " has invalid metadata nibble " + std::to_string(nibble));
          }
          uint8_t& byte = row_nibbles[static_cast<size_t>(g / 2)];
          byte = static_cast<uint8_t>((byte & ~(0xF << ((g & 1) * 4))) | nibble << ((g & 1) * 4));
        }
      }
      row_loaded = r;
    }
    std::memcpy(out.meta.as<uint8_t>() + offset * word_bytes, row_nibbles.data() + c * word_bytes,
                static_cast<size_t>(word_bytes));
  });
  if (!status) return status.error();
  return out;
}

Status validate(const CutlassSm80& packed, std::string_view name) {
  const std::string pre = name_prefix(name) + "cutlass_sm80: ";
  if (!sm80_dtype(packed.dtype())) {
    return Error(pre + "dtype " + std::string(dtype_name(packed.dtype())) + " is not F16, BF16, I8 or F8_E4M3");
  }
  if (packed.rows < 0 || packed.K < 0) {
    return Error(pre + "negative shape rows " + std::to_string(packed.rows) + ", K " + std::to_string(packed.K));
  }
  const Shape values_shape{packed.rows_pad(), packed.K_pad() / 2};
  if (packed.values.shape() != values_shape) {
    return Error(pre + "values are " + shape_str(packed.values.shape()) + ", expected " +
                 shape_str(values_shape) + " for rows " + std::to_string(packed.rows) + ", K " +
                 std::to_string(packed.K));
  }
  const Shape meta_shape{packed.rows_pad(), packed.meta_row_bytes()};
  if (packed.meta.dtype() != DType::U8 || packed.meta.shape() != meta_shape) {
    return Error(pre + "meta is " + std::string(dtype_name(packed.meta.dtype())) + " " +
                 shape_str(packed.meta.shape()) + ", expected U8 " + shape_str(meta_shape));
  }
  const size_t es = dtype_size(packed.dtype());
  const uint64_t mag = format_detail::magnitude_bits_mask(packed.dtype());
  const int64_t word_bytes = packed.meta_bits() / 8, groups_per_word = packed.meta_bits() / 4;
  const int64_t half = packed.K_pad() / 2;
  Status status = ok_status();
  for_each_word(packed, [&](int64_t r, int64_t c, int64_t offset) {
    if (!status) return;
    uint32_t word = 0;
    std::memcpy(&word, packed.meta.as<uint8_t>() + offset * word_bytes, static_cast<size_t>(word_bytes));
    for (int64_t i = 0; i < groups_per_word && status; ++i) {
      const int64_t g = c * groups_per_word + i;
      const unsigned nibble = (word >> (4 * i)) & 0xFu;
      const bool padding_group = r >= packed.rows || g * 4 >= packed.K;
      if (!format_detail::valid_sparse24_nibble(nibble) || (padding_group && nibble != kPaddingNibble)) {
        status = Error(pre + place(r, g) + " has " + (padding_group ? "padding " : "") +
                       "metadata nibble " + std::to_string(nibble));
      }
      const int64_t k[2] = {g * 4 + (nibble & 3u), g * 4 + (nibble >> 2)};
      for (int s = 0; s < 2 && status; ++s) {
        const std::byte* value = packed.values.data() + static_cast<size_t>(r * half + g * 2 + s) * es;
        if ((r >= packed.rows || k[s] >= packed.K) && (format_detail::load_bits(value, es) & mag) != 0) {
          status = Error(pre + place(r, g) + " has a non-zero value at padding position " + std::to_string(k[s]));
        }
      }
    }
  });
  return status;
}

Result<Sparse24> from_cutlass_sm80(const CutlassSm80& packed, std::string_view name) {
  NMKIT_TRY(validate(packed, name));
  Sparse24 out;
  out.K = packed.K;
  const size_t es = dtype_size(packed.dtype());
  const int64_t src_half = packed.K_pad() / 2, dst_half = out.K_pad() / 2, stride = out.meta_stride();
  out.values = Tensor::empty(packed.dtype(), {packed.rows, dst_half});
  out.meta = Tensor::zeros(DType::U8, {packed.rows, stride});
  for (int64_t r = 0; r < packed.rows; ++r) {
    std::memcpy(out.values.data() + static_cast<size_t>(r * dst_half) * es,
                packed.values.data() + static_cast<size_t>(r * src_half) * es, static_cast<size_t>(dst_half) * es);
  }
  const int64_t word_bytes = packed.meta_bits() / 8;
  for_each_word(packed, [&](int64_t r, int64_t c, int64_t offset) {
    if (r >= packed.rows) return;
    const int64_t first = c * word_bytes;  // sparse24 meta byte of the word's first group
    const int64_t n = std::min(word_bytes, stride - first);
    if (n > 0) {
      std::memcpy(out.meta.as<uint8_t>() + r * stride + first,
                  packed.meta.as<uint8_t>() + offset * word_bytes, static_cast<size_t>(n));
    }
  });
  // A sparse24 row whose group count is odd ends in half a byte: its high nibble is 0, not padding.
  if ((out.K_pad() / 4) % 2 == 1) {
    for (int64_t r = 0; r < packed.rows; ++r) out.meta.as<uint8_t>()[r * stride + stride - 1] &= 0x0F;
  }
  return out;
}

}  // namespace nmkit
