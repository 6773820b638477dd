#include "linear/linear_row_lanes.h"

#include <cstring>

#include "cpu/linear_common.h"
#include "linear/linear_slid_forms.h"

namespace nmkit::cpu {
namespace {

int64_t row_groups(const PackedLinear& w) { return (w.rows + kRowLaneRows - 1) / kRowLaneRows; }

size_t record_bytes(const PackedLinear& w) { return static_cast<size_t>(row_groups(w) * row_lane_group_bytes(w)); }

// Copies per-row arrays (INT8 scales and sums; empty for bf16) unchanged: rows past w.rows are never
// read (masked loads).
AlignedBytes copy_of(const AlignedBytes& from) {
  if (from.size == 0) return {};
  AlignedBytes to = AlignedBytes::zeros(from.size);
  std::memcpy(to.data.get(), from.data.get(), from.size);
  to.size = from.size;
  return to;
}

// The K position of kept value j of a packed sparse24 record (linear_pack.cc): per row and chunk,
// value j of group j / 2 at the position in 2-bit field j % 16 of meta word j / 16 (f32/bf16 chunks
// of 32 have one word; INT8 chunks of 128 four, of 64 two).
int64_t kept_position(const uint32_t* words, int64_t chunk_start, int j) {
  return chunk_start + 32 * (j / 16) + sparse24_position(words[j / 16], j % 16);
}

// The source's kept values and positions moved into the row-lane layout. Padding groups keep
// positions (0, 1) with zero values, padding rows are zero.
std::unique_ptr<PackedLinear> pack_row_lanes(const PackedLinear& w) {
  const bool int8 = w.dtype == DType::I8;
  NMKIT_ASSERT(w.kind == WeightFormat::Sparse24 && (int8 || w.dtype == DType::BF16) &&
               w.K_x * row_lane_value_bytes(w) % kRowLaneWindowBytes == 0);
  auto form = std::make_unique<PackedLinear>();
  form->kind = WeightFormat::Sparse24;
  form->dtype = w.dtype;
  form->tier = w.tier;
  form->bf16_x = w.bf16_x;
  form->rows = w.rows;
  form->K = w.K;
  form->K_x = w.K_x;
  form->row_blocks = row_groups(w);
  form->slide = w.slide;
  form->values = AlignedBytes::zeros(record_bytes(w));
  form->values.size = record_bytes(w);
  form->row_scale = copy_of(w.row_scale);
  form->row_sum = copy_of(w.row_sum);
  copy_bias(w, *form);
  const int64_t size = row_lane_value_bytes(w);
  const int64_t chunk = int8 ? kLinearChunkInt8 : kLinearChunk;
  const int64_t chunks = int8 ? int8_chunks(w.K_x) : w.K_x / chunk, window = kRowLaneWindowBytes / size;
  const int64_t windows = row_lane_windows(w);
  // Per record, each row's 4 bytes: 4 INT8 codes (2 groups) or 2 bf16 values (1 group).
  const int64_t per_lane = 4 / size, groups_per_record = per_lane / 2;
  const auto* source_values = w.values.as<uint8_t>();
  const auto* meta = w.meta.as<uint32_t>();
  auto* out = form->values.as<uint8_t>();
  for (int64_t row = 0; row < w.rows; ++row) {
    const int64_t g = row / kRowLaneRows, lane = row % kRowLaneRows;
    const int64_t b = row / kLinearRowBlock, r = row % kLinearRowBlock;
    for (int64_t c = 0; c < chunks; ++c) {
      // The record's first value and meta word, and its kept values (INT8: cpu/linear_common.h
      // sparse24_int8_k, 64 or, in a last chunk of 64 K, 32; f32/bf16 16 in one word).
      const int64_t k0 = int8 ? sparse24_int8_k(w, b, c, r) : ((b * chunks + c) * kLinearRowBlock + r) * chunk;
      const int64_t first_value = k0 / 2, first_word = int8 ? k0 / 32 : k0 / chunk;
      const int64_t kept = (int8 ? int8_chunk_width(w.K_x, c) : chunk) / 2;
      for (int j = 0; j < kept; ++j) {
        const int64_t k = kept_position(meta + first_word, c * chunk, j);
        const uint8_t* value = source_values + (first_value + j) * size;
        const int64_t group = (k % window) / 4;  // within the window
        uint8_t* record =
            out + ((g * windows + k / window) * kRowLaneRecords + group / groups_per_record) * kRowLaneRecordBytes;
        const int64_t slot = per_lane * lane + 2 * (group % groups_per_record) + j % 2;  // element of the record
        const auto position = static_cast<uint16_t>(k % window);  // a byte (INT8) or a word (bf16)
        std::memcpy(record + slot * size, &position, static_cast<size_t>(size));  // little-endian
        std::memcpy(record + 64 + slot * size, value, static_cast<size_t>(size));
      }
    }
  }
  form->streamed_bytes = form->values.size + form->row_scale.size + form->row_sum.size;
  return form;
}

}  // namespace

const PackedLinear& row_lanes_form(const PackedLinear& w) {
  std::call_once(w.row_lanes_once, [&w] { w.row_lanes = pack_row_lanes(w); });
  return *w.row_lanes;
}

size_t row_lanes_bytes(const PackedLinear& w) { return record_bytes(w) + w.row_scale.size + w.row_sum.size; }

}  // namespace nmkit::cpu
