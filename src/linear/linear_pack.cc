#include "linear/linear_pack.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "cpu/linear_common.h"
#include "nmkit/threads.h"

namespace nmkit::cpu {

namespace {

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// Rows of width K handed to a thread at a time by the packers' parallel loops: about 64K elements,
// enough to amortise the hand-off, few enough to balance.
int64_t rows_per_task(int64_t K) { return std::max<int64_t>(1, 65536 / std::max<int64_t>(1, K)); }

// The canonical meta nibbles of n groups (a record's first n slots) copied into a record's meta,
// which holds them in the same order, two to a byte; an odd last group shares its byte with the
// first padding slot, which keeps (0, 1) (the record was filled with 0x44 bytes).
void copy_nibbles(uint8_t* record_meta, const uint8_t* canonical, int64_t n) {
  std::memcpy(record_meta, canonical, static_cast<size_t>(n / 2));
  if (n % 2 == 1) record_meta[n / 2] = static_cast<uint8_t>((canonical[n / 2] & 0x0Fu) | 0x40u);
}

// The dtype a weight is packed in: f16 has no kernels, so it is widened to f32 exactly.
Result<DType> packed_dtype(DType dtype, const std::string& what) {
  if (dtype == DType::F32 || dtype == DType::F16) return DType::F32;
  if (dtype == DType::BF16) return DType::BF16;
  return Error(what + ": weight dtype " + std::string(dtype_name(dtype)) +
               " is not supported (f32, bf16 or f16)");
}

// Element i of a prunable-dtype array, converted to the packed dtype and stored at dst[j].
void copy_element(DType src_dtype, const std::byte* src, int64_t i, DType dst_dtype, std::byte* dst, int64_t j) {
  if (dst_dtype == DType::BF16) {  // bf16 stays bf16: bit copy
    std::memcpy(dst + j * 2, src + i * 2, 2);
    return;
  }
  if (dst_dtype == DType::I8) {  // INT8 codes
    dst[j] = src[i];
    return;
  }
  float value = 0;
  if (src_dtype == DType::F32) std::memcpy(&value, src + i * 4, 4);
  else {
    uint16_t bits;
    std::memcpy(&bits, src + i * 2, 2);
    value = src_dtype == DType::F16 ? f16_to_f32(bits) : bf16_to_f32(bits);
  }
  std::memcpy(dst + j * 4, &value, 4);
}

std::unique_ptr<PackedLinear> start(WeightFormat kind, DType dtype, int64_t rows, int64_t K, int64_t chunk) {
  auto packed = std::make_unique<PackedLinear>();
  packed->kind = kind;
  packed->dtype = dtype;
  packed->rows = rows;
  packed->K = K;
  packed->K_x = round_up(K, chunk);
  packed->row_blocks = (rows + kLinearRowBlock - 1) / kLinearRowBlock;
  return packed;
}

Status check_shape(int64_t rows, int64_t K, const std::string& what) {
  if (rows < 1 || K < 1) {
    return Error(what + ": weight shape [" + std::to_string(rows) + ", " + std::to_string(K) +
                 "] must have rows >= 1 and K >= 1");
  }
  return ok_status();
}

Status check_int8(int64_t K_x, const std::string& what) {
  // (code + 128) <= 255 times |code| <= 127 summed over K_x stays below 2^31 while K_x <= 65536.
  if (K_x > 65536) {
    return Error(what + ": K = " + std::to_string(K_x) + " is above 65536, where int32 sums of int8 products may overflow");
  }
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<PackedLinear>> record_layout(const RecordForm& form, bool allocate, const std::string& what) {
  NMKIT_TRY(check_shape(form.rows, form.K, what));
  if (form.dtype != DType::F32 && form.dtype != DType::BF16 && form.dtype != DType::I8) {
    return Error(what + ": packed dtype " + std::string(dtype_name(form.dtype)) + " is not f32, bf16 or int8");
  }
  const auto bytes = [allocate](int64_t n) {
    return allocate ? AlignedBytes::zeros(static_cast<size_t>(n)) : AlignedBytes::reserved(static_cast<size_t>(n));
  };
  const bool int8 = form.dtype == DType::I8;
  const auto size = static_cast<int64_t>(dtype_size(form.dtype));
  // INT8 rows are padded to 64 K (the last chunk of a row block may be 64 wide); f32/bf16 dense rows
  // to 32; f32/bf16 sparse24 to 64, so that the bf16-activation kernel takes chunk pairs.
  const int64_t chunk = int8 ? kLinearChunkInt8Tail : kLinearChunk;
  std::unique_ptr<PackedLinear> packed;
  switch (form.kind) {
    case WeightFormat::Dense: {
      packed = start(WeightFormat::Dense, form.dtype, form.rows, form.K, chunk);
      const int64_t width = int8 ? packed->K_x : form.K;  // f32/bf16 rows are the file's, unpadded
      packed->values = bytes(form.rows * width * size);
      packed->parts = {RowPart{packed->values.data.get(), form.rows, width}};
      break;
    }
    case WeightFormat::Sparse24: {
      packed = start(WeightFormat::Sparse24, form.dtype, form.rows, form.K, int8 ? chunk : 2 * chunk);
      // f32/bf16: records of 8 groups (16 values, one meta word) per row and 32 K; INT8: per row and
      // 128 K, 64 values and four meta words (half of that for a last chunk of 64).
      const int64_t padded_k = packed->row_blocks * kLinearRowBlock * packed->K_x;
      packed->values = bytes(padded_k / 2 * size);
      packed->meta = bytes(padded_k / 8);
      // Padding groups (missing rows, groups past K) name positions 0 and 1, with zero values; a
      // packer overwrites the real ones.
      if (allocate) std::fill_n(packed->meta.as<uint32_t>(), padded_k / 32, 0x44444444u);
      break;
    }
    case WeightFormat::NM: {
      if (form.pattern.group > 16) {
        return Error(what + ": pattern " + form.pattern.str() + " has group > 16 (kernels take groups up to 16)");
      }
      packed = start(WeightFormat::NM, form.dtype, form.rows, form.K, chunk);
      packed->pattern = form.pattern;
      packed->superchunk = std::lcm<int64_t>(form.pattern.group, chunk);
      packed->K_x = round_up(form.pattern.padded(form.K), packed->superchunk);
      packed->value_stride = packed->superchunk / form.pattern.group * form.pattern.keep;
      packed->mask_stride = packed->superchunk / 8;
      const int64_t records = packed->row_blocks * (packed->K_x / packed->superchunk) * kLinearRowBlock;
      packed->values = bytes(records * packed->value_stride * size + static_cast<int64_t>(kLinearSlack));
      packed->values.size = static_cast<size_t>(records * packed->value_stride * size);
      packed->meta = bytes(records * packed->mask_stride);
      break;
    }
  }
  if (int8) {
    NMKIT_TRY(check_int8(packed->K_x, what));
    // Per-row scales and code sums, the padding rows' zero.
    const int64_t padded = packed->row_blocks * kLinearRowBlock;
    packed->row_scale = bytes(padded * 4);
    packed->row_sum = bytes(padded * 4);
    packed->row_scale.size = packed->row_sum.size = static_cast<size_t>(form.rows) * 4;
  }
  return packed;
}

void count_streamed_bytes(PackedLinear& packed) {
  packed.streamed_bytes = packed.meta.size + packed.row_scale.size + packed.row_sum.size;
  if (packed.kind != WeightFormat::Dense) {
    packed.streamed_bytes += packed.values.size;
    return;
  }
  // Dense rows (owned or borrowed): K values each (INT8: K_x, zero-padded, and streamed).
  const int64_t width = packed.dtype == DType::I8 ? packed.K_x : packed.K;
  packed.streamed_bytes += static_cast<size_t>(packed.rows * width) * dtype_size(packed.dtype);
}

namespace {

// The checks every dense weight passes: parts of one dtype and K, each [rows >= 1, K >= 1].
Status check_parts(const std::vector<TensorView>& parts) {
  if (parts.empty()) return Error("dense weight: no parts");
  for (size_t i = 0; i < parts.size(); ++i) {
    const TensorView& part = parts[i];
    const std::string what = parts.size() == 1 ? "dense weight" : "dense weight part " + std::to_string(i);
    if (part.shape.size() != 2) return Error(what + ": expected a 2-D tensor, got " + shape_str(part.shape));
    NMKIT_TRY(check_shape(part.rows(), part.cols(), what));
    if (part.cols() != parts[0].cols() || part.dtype != parts[0].dtype) {
      return Error(what + ": " + std::string(dtype_name(part.dtype)) + " " + shape_str(part.shape) +
                   " does not stack with part 0 (" + std::string(dtype_name(parts[0].dtype)) + " " +
                   shape_str(parts[0].shape) + "): parts share K and dtype");
    }
  }
  return ok_status();
}

int64_t total_rows(const std::vector<TensorView>& parts) {
  int64_t rows = 0;
  for (const TensorView& part : parts) rows += part.rows();
  return rows;
}

}  // namespace

Result<std::unique_ptr<PackedLinear>> pack_dense(const std::vector<TensorView>& parts) {
  NMKIT_TRY(check_parts(parts));
  auto dtype = packed_dtype(parts[0].dtype, "dense weight");
  if (!dtype.ok()) return dtype.error();
  const int64_t K = parts[0].cols();
  auto layout = record_layout({WeightFormat::Dense, *dtype, total_rows(parts), K}, true, "dense weight");
  if (!layout.ok()) return layout.error();
  auto packed = std::move(*layout);
  const size_t size = dtype_size(*dtype);
  std::byte* dst = packed->values.data.get();
  for (const TensorView& part : parts) {
    const int64_t n = part.rows() * K;
    if (part.dtype == *dtype) {
      std::memcpy(dst, part.data, static_cast<size_t>(n) * size);
    } else {  // f16 widened to f32
      for (int64_t i = 0; i < n; ++i) copy_element(part.dtype, part.data, i, *dtype, dst, i);
    }
    dst += static_cast<size_t>(n) * size;
  }
  count_streamed_bytes(*packed);
  return packed;
}

Result<std::unique_ptr<PackedLinear>> pack_dense_in_place(const std::vector<TensorView>& parts,
                                                          std::shared_ptr<const void> owner) {
  NMKIT_TRY(check_parts(parts));
  const DType dtype = parts[0].dtype;
  if (dtype != DType::F32 && dtype != DType::BF16) {
    return Error("dense weight: dtype " + std::string(dtype_name(dtype)) + " cannot be read in place (f32 or bf16)");
  }
  auto packed = start(WeightFormat::Dense, dtype, total_rows(parts), parts[0].cols(), kLinearChunk);
  for (const TensorView& part : parts) packed->parts.push_back(RowPart{part.data, part.rows(), part.cols()});
  packed->owner = std::move(owner);
  count_streamed_bytes(*packed);
  return packed;
}

Result<std::unique_ptr<PackedLinear>> pack_sparse24(const Sparse24& weight) {
  NMKIT_TRY(validate(weight, "sparse24 weight"));
  NMKIT_TRY(check_shape(weight.rows(), weight.K, "sparse24 weight"));
  auto dtype = packed_dtype(weight.dtype(), "sparse24 weight");
  if (!dtype.ok()) return dtype.error();
  auto layout = record_layout({WeightFormat::Sparse24, *dtype, weight.rows(), weight.K}, true, "sparse24 weight");
  if (!layout.ok()) return layout.error();
  auto packed = std::move(*layout);
  const int64_t chunks = packed->K_x / kLinearChunk;
  const int64_t groups = weight.K_pad() / 4;  // real groups per row (the rest is chunk padding)
  const size_t size = dtype_size(*dtype);
  auto* words = packed->meta.as<uint32_t>();
  const auto* meta = weight.meta.as<uint8_t>();
  const std::byte* src = weight.values.data();
  const int64_t value_stride = weight.K_pad() / 2;
  const bool same_dtype = weight.dtype() == *dtype;
  // Rows in parallel, each writing its own records. A record is the canonical layout of its 8
  // groups: slot s's nibble at bit 4s (the canonical meta bytes, little-endian), values in order.
  parallel_for(weight.rows(), rows_per_task(packed->K_x), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t b = row / kLinearRowBlock, r = row % kLinearRowBlock;
      const uint8_t* row_meta = meta + row * weight.meta_stride();
      for (int64_t g0 = 0; g0 < groups; g0 += 8) {
        const int64_t record = (b * chunks + g0 / 8) * kLinearRowBlock + r;
        const int64_t n = std::min<int64_t>(8, groups - g0);
        copy_nibbles(reinterpret_cast<uint8_t*>(words + record), row_meta + g0 / 2, n);
        if (same_dtype) {
          std::memcpy(packed->values.data.get() + static_cast<size_t>(record * 16) * size,
                      src + static_cast<size_t>(row * value_stride + 2 * g0) * size, static_cast<size_t>(2 * n) * size);
        } else {
          for (int64_t i = 0; i < 2 * n; ++i) {
            copy_element(weight.dtype(), src, row * value_stride + 2 * g0 + i, *dtype, packed->values.data.get(), record * 16 + i);
          }
        }
      }
    }
  });
  count_streamed_bytes(*packed);
  return packed;
}

namespace {

// The rows of a validated weight whose values are `values` ([rows, groups * keep], the weight's own
// or their INT8 codes) placed in nm records from row `row0` of `packed` on.
void nm_fill_rows(PackedLinear& packed, const NMPacked& weight, const Tensor& values, int64_t row0) {
  const Pattern pattern = weight.pattern;
  const int64_t superchunks = packed.K_x / packed.superchunk;
  const DType dtype = packed.dtype;
  const size_t size = dtype_size(dtype);
  const int64_t src_values = weight.groups() * pattern.keep;  // per source row
  const int64_t groups_per_chunk = packed.superchunk / pattern.group;
  auto* mask = packed.meta.as<uint8_t>();
  const auto* src_mask = weight.mask.as<uint8_t>();
  const int64_t src_mask_stride = weight.mask_stride(), chunk_bytes = packed.mask_stride;
  const bool same_dtype = values.dtype() == dtype;
  // Rows in parallel, each writing only its own records. A superchunk is a whole number of bytes of
  // mask (chunks are multiples of 8 K), so its bits copy byte for byte; a source row has no bits
  // past K_pad (validate), so the bytes past its end stay zero.
  parallel_for(weight.rows(), rows_per_task(packed.K_x), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t b = (row0 + row) / kLinearRowBlock;
      const int r = static_cast<int>((row0 + row) % kLinearRowBlock);
      for (int64_t c = 0; c < superchunks; ++c) {
        const int64_t record = (b * superchunks + c) * kLinearRowBlock + r;
        // Groups past the weight's last one stay all-zero (no mask bits, zero values).
        const int64_t first = c * groups_per_chunk * pattern.keep;
        const int64_t count = std::min(packed.value_stride, src_values - first);
        if (same_dtype && count > 0) {
          std::memcpy(packed.values.data.get() + static_cast<size_t>(record * packed.value_stride) * size,
                      values.data() + static_cast<size_t>(row * src_values + first) * size, static_cast<size_t>(count) * size);
        } else {
          for (int64_t i = 0; i < count; ++i) {
            copy_element(values.dtype(), values.data(), row * src_values + first + i, dtype, packed.values.data.get(),
                         record * packed.value_stride + i);
          }
        }
        const int64_t from = c * chunk_bytes;
        const int64_t bytes = std::min(chunk_bytes, src_mask_stride - from);
        if (bytes > 0) {
          std::memcpy(mask + record * packed.mask_stride, src_mask + row * src_mask_stride + from, static_cast<size_t>(bytes));
        }
      }
    }
  });
}

Result<std::unique_ptr<PackedLinear>> nm_records(const NMPacked& weight, const Tensor& values, DType dtype,
                                                 const std::string& what) {
  auto packed = record_layout({WeightFormat::NM, dtype, weight.rows(), weight.K, weight.pattern}, true, what);
  if (packed.ok()) nm_fill_rows(**packed, weight, values, 0);
  return packed;
}

Status check_nm(const NMPacked& weight, const std::string& what) {
  NMKIT_TRY(validate(weight, what));
  NMKIT_TRY(check_shape(weight.rows(), weight.K, what));
  if (weight.pattern.group > 16) {
    return Error(what + ": pattern " + weight.pattern.str() + " has group > 16 (kernels take groups up to 16)");
  }
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<PackedLinear>> pack_nm(const NMPacked& weight) {
  NMKIT_TRY(check_nm(weight, "nm weight"));
  auto dtype = packed_dtype(weight.dtype(), "nm weight");
  if (!dtype.ok()) return dtype.error();
  auto packed = nm_records(weight, weight.values, *dtype, "nm weight");
  if (packed.ok()) count_streamed_bytes(**packed);
  return packed;
}

namespace {

// Per-row scales and sums of the codes (row_sum feeds the unsigned-activation form of VNNI) into
// the layout's arrays.
void int8_rows(PackedLinear& packed, const Tensor& scales, const std::vector<int32_t>& sums) {
  std::memcpy(packed.row_scale.data.get(), scales.data(), static_cast<size_t>(packed.rows) * 4);
  std::memcpy(packed.row_sum.data.get(), sums.data(), static_cast<size_t>(packed.rows) * 4);
}

}  // namespace

Result<std::unique_ptr<PackedLinear>> pack_dense_int8(const std::vector<Quantized>& parts) {
  if (parts.empty()) return Error("int8 dense weight: no parts");
  int64_t rows = 0;
  for (const Quantized& part : parts) {
    const Tensor& codes = part.codes;
    if (part.type != QuantType::Int8 || codes.dtype() != DType::I8 || codes.shape().size() != 2 ||
        codes.cols() != parts[0].codes.cols()) {
      return Error("int8 dense weight: expected I8 codes of shape [rows, K] (one K), got " +
                   std::string(dtype_name(codes.dtype())) + " " + shape_str(codes.shape()));
    }
    rows += codes.rows();
  }
  const int64_t K = parts[0].codes.cols();
  NMKIT_TRY(check_shape(rows, K, "int8 dense weight"));
  // Rows zero-padded to K_x (a multiple of 64): the kernels' steps need no tail. Each part's codes are
  // copied into its rows (no stacked copy of the codes beside them).
  auto layout = record_layout({WeightFormat::Dense, DType::I8, rows, K}, true, "int8 dense weight");
  if (!layout.ok()) return layout.error();
  auto packed = std::move(*layout);
  auto* dst = packed->values.as<int8_t>();
  std::vector<int32_t> sums(static_cast<size_t>(packed->rows), 0);
  Tensor scales = Tensor::empty(DType::F32, {rows});
  int64_t row = 0;
  for (const Quantized& part : parts) {
    const auto* src = part.codes.as<int8_t>();
    std::memcpy(scales.as<float>() + row, part.scales.data(), static_cast<size_t>(part.codes.rows()) * 4);
    parallel_for(part.codes.rows(), rows_per_task(K), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        std::memcpy(dst + (row + r) * packed->K_x, src + r * K, static_cast<size_t>(K));
        int32_t sum = 0;
        for (int64_t k = 0; k < K; ++k) sum += src[r * K + k];
        sums[static_cast<size_t>(row + r)] = sum;
      }
    });
    row += part.codes.rows();
  }
  int8_rows(*packed, scales, sums);
  count_streamed_bytes(*packed);
  return packed;
}

namespace {

// The rows of int8 sparse24 codes `w` placed in the records from row `row0` of `packed` on, their
// code sums in sums[row0 + r].
void sparse24_int8_fill_rows(PackedLinear& packed, const Sparse24& w, int64_t row0, std::vector<int32_t>& sums) {
  const int64_t groups = w.K_pad() / 4;
  auto* dst = packed.values.as<int8_t>();
  const auto* meta = w.meta.as<uint8_t>();
  const auto* src = w.values.as<int8_t>();
  const int64_t value_stride = w.K_pad() / 2;
  // Rows in parallel: a row's records (values and meta words) belong to it alone. Within a record
  // the layout is the canonical one, chunk by chunk: slot s's nibble is bit 4s of the record's meta
  // (the canonical meta bytes, little-endian) and its values follow in order, so a chunk copies.
  parallel_for(w.rows(), rows_per_task(packed.K_x), [&](int64_t r0, int64_t r1) {
    auto* meta_bytes = packed.meta.as<uint8_t>();
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t b = (row0 + row) / kLinearRowBlock, r = (row0 + row) % kLinearRowBlock;
      const int8_t* row_values = src + row * value_stride;
      const uint8_t* row_meta = meta + row * w.meta_stride();
      for (int64_t g0 = 0; g0 < groups; g0 += 32) {
        const int64_t k = sparse24_int8_k(packed, b, g0 / 32, r);
        const int64_t n = std::min<int64_t>(32, groups - g0);
        std::memcpy(dst + k / 2, row_values + 2 * g0, static_cast<size_t>(2 * n));
        copy_nibbles(meta_bytes + k / 8, row_meta + g0 / 2, n);
      }
      int32_t sum = 0;
      for (int64_t i = 0; i < 2 * groups; ++i) sum += row_values[i];
      sums[static_cast<size_t>(row0 + row)] = sum;
    }
  });
}

// Code sums of `rows` rows of `per_row` codes into sums[row0 + r].
void code_sums(const int8_t* codes, int64_t rows, int64_t per_row, int64_t row0, std::vector<int32_t>& sums) {
  parallel_for(rows, rows_per_task(per_row), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      int32_t sum = 0;
      for (int64_t i = 0; i < per_row; ++i) sum += codes[row * per_row + i];
      sums[static_cast<size_t>(row0 + row)] = sum;
    }
  });
}

// Rows of a weight of width K in `dtype` per slice of the by-rows packers: about 2 MiB of packed
// values, so that a slice is pruned, quantized and placed while it is in cache (at least a row block).
int64_t slice_rows(int64_t K, DType dtype) {
  const int64_t row_bytes = std::max<int64_t>(1, K * static_cast<int64_t>(dtype_size(dtype)));
  return std::max<int64_t>(kLinearRowBlock, (int64_t{1} << 21) / row_bytes / kLinearRowBlock * kLinearRowBlock);
}

// What a slice's validation errors name: their rows count from the slice's first.
std::string slice_name(const std::string& what, int64_t row0, int64_t rows) {
  return what + " rows " + std::to_string(row0) + "-" + std::to_string(row0 + rows - 1);
}

// A slice's bytes zeroed before each fill (empty_* leaves them as allocated): what a fill leaves
// unwritten is zero, never a previous slice's.
void clear(Tensor& t) {
  if (t.nbytes() > 0) std::memset(t.data(), 0, t.nbytes());
}
Tensor& position_bits(NMPacked& p) { return p.mask; }
Tensor& position_bits(Sparse24& p) { return p.meta; }

// The slice loop of the by-rows packers: slices of `step` rows, each zeroed, filled, validated and
// handed to `place(row0, slice)`, which quantizes it into the records. Whole slices go to a thread:
// the parallel loops inside a slice's work then run on it alone (design 8.3), with no hand-off per
// step of a slice (docs/data.md, "INT8 sparse forms straight into their records"). The error
// returned is the first failed slice's, in row order.
template <class Packed, class Make, class Place>
Status for_each_slice(int64_t rows, int64_t step, const std::string& what, Make make,
                      const std::function<Status(int64_t, Packed&)>& fill, Place place) {
  const int64_t slices = (rows + step - 1) / step;
  std::mutex mutex;
  int64_t failed = slices;  // the first failed slice; the ones after it need not run
  Status failure = ok_status();
  parallel_for(slices, 1, [&](int64_t s0, int64_t s1) {
    Packed slice;
    for (int64_t s = s0; s < s1; ++s) {
      {
        const std::lock_guard lock(mutex);
        if (failed < s) return;
      }
      const int64_t row0 = s * step, n = std::min(step, rows - row0);
      if (slice.rows() != n || slice.values.nbytes() == 0) slice = make(n);
      clear(slice.values);
      clear(position_bits(slice));
      Status done = fill(row0, slice);
      if (done.ok()) done = validate(slice, slice_name(what, row0, n));
      if (done.ok()) done = place(row0, slice);
      if (!done.ok()) {
        const std::lock_guard lock(mutex);
        if (s < failed) {
          failed = s;
          failure = std::move(done);
        }
        return;
      }
    }
  });
  return failure;
}

// Rows per slice: about 2 MiB of a weight's rows (slice_rows), but at least four slices per thread
// where the weight has the rows, so that every thread has slices to take.
int64_t slice_step(int64_t rows, int64_t K, DType dtype) {
  const int64_t spread = 4 * static_cast<int64_t>(thread_count());
  const int64_t even = round_up((rows + spread - 1) / spread, kLinearRowBlock);
  return std::max<int64_t>(kLinearRowBlock, std::min(slice_rows(K, dtype), even));
}

}  // namespace

Result<std::unique_ptr<PackedLinear>> pack_sparse24_int8(const QuantizedSparse24& weight) {
  const Sparse24& w = weight.packed;
  if (weight.type != QuantType::Int8 || w.dtype() != DType::I8) {
    return Error("int8 sparse24 weight: expected I8 values, got " + std::string(dtype_name(w.dtype())));
  }
  auto packed = record_layout({WeightFormat::Sparse24, DType::I8, w.rows(), w.K}, true, "int8 sparse24 weight");
  if (!packed.ok()) return packed.error();
  std::vector<int32_t> sums(static_cast<size_t>(w.rows()), 0);
  sparse24_int8_fill_rows(**packed, w, 0, sums);
  int8_rows(**packed, weight.scales, sums);
  count_streamed_bytes(**packed);
  return std::move(*packed);
}

Result<std::unique_ptr<PackedLinear>> pack_nm_int8(const NMPacked& weight, const Quantized& values) {
  NMKIT_TRY(check_nm(weight, "int8 nm weight"));
  const int64_t per_row = weight.groups() * weight.pattern.keep;
  if (values.type != QuantType::Int8 || values.codes.dtype() != DType::I8 || values.codes.shape() != Shape{weight.rows(), per_row}) {
    return Error("int8 nm weight: expected I8 codes of shape " + shape_str({weight.rows(), per_row}) + ", got " +
                 std::string(dtype_name(values.codes.dtype())) + " " + shape_str(values.codes.shape()));
  }
  auto records = nm_records(weight, values.codes, DType::I8, "int8 nm weight");
  if (!records.ok()) return records.error();
  PackedLinear& packed = **records;
  std::vector<int32_t> sums(static_cast<size_t>(packed.rows), 0);
  code_sums(values.codes.as<int8_t>(), packed.rows, per_row, 0, sums);
  int8_rows(packed, values.scales, sums);
  count_streamed_bytes(packed);
  return records;
}

Result<std::unique_ptr<PackedLinear>> pack_nm_int8_by_rows(int64_t rows, int64_t K, Pattern pattern, DType dtype,
                                                           const NMSliceFill& fill) {
  const std::string what = "int8 nm weight";
  auto layout = record_layout({WeightFormat::NM, DType::I8, rows, K, pattern}, true, what);
  if (!layout.ok()) return layout.error();
  auto packed = std::move(*layout);
  std::vector<int32_t> sums(static_cast<size_t>(rows), 0);
  Tensor scales = Tensor::empty(DType::F32, {rows});
  NMKIT_TRY(for_each_slice<NMPacked>(
      rows, slice_step(rows, K, dtype), what, [&](int64_t n) { return empty_nm(dtype, n, K, pattern); }, fill,
      [&](int64_t row0, const NMPacked& slice) -> Status {
        // Per-row codes: a slice's are the whole weight's rows'.
        auto q = quantize_weights(slice.values.view(), QuantType::Int8, what);
        if (!q.ok()) return q.error();
        nm_fill_rows(*packed, slice, q->codes, row0);
        code_sums(q->codes.as<int8_t>(), slice.rows(), q->codes.cols(), row0, sums);
        std::memcpy(scales.as<float>() + row0, q->scales.data(), static_cast<size_t>(slice.rows()) * 4);
        return ok_status();
      }));
  int8_rows(*packed, scales, sums);
  count_streamed_bytes(*packed);
  return packed;
}

Result<std::unique_ptr<PackedLinear>> pack_sparse24_int8_by_rows(int64_t rows, int64_t K, DType dtype,
                                                                 const Sparse24SliceFill& fill) {
  const std::string what = "int8 sparse24 weight";
  auto packed = record_layout({WeightFormat::Sparse24, DType::I8, rows, K}, true, what);
  if (!packed.ok()) return packed.error();
  std::vector<int32_t> sums(static_cast<size_t>(rows), 0);
  Tensor scales = Tensor::empty(DType::F32, {rows});
  NMKIT_TRY(for_each_slice<Sparse24>(
      rows, slice_step(rows, K, dtype), what, [&](int64_t n) { return empty_sparse24(dtype, n, K); }, fill,
      [&](int64_t row0, const Sparse24& slice) -> Status {
        auto q = quantize_weights(slice, QuantType::Int8, what);
        if (!q.ok()) return q.error();
        sparse24_int8_fill_rows(**packed, q->packed, row0, sums);
        std::memcpy(scales.as<float>() + row0, q->scales.data(), static_cast<size_t>(slice.rows()) * 4);
        return ok_status();
      }));
  int8_rows(**packed, scales, sums);
  count_streamed_bytes(**packed);
  return std::move(*packed);
}

}  // namespace nmkit::cpu
