#include "linear/linear_row_lanes.h"

#include <cstring>

#include "cpu/linear_common.h"
#include "linear/linear_pack.h"
#include "linear/linear_slid_forms.h"

namespace nmkit::cpu {
namespace {

constexpr int64_t kPairsPerWindow = kRowLaneWindow / 8;

int64_t row_groups(const PackedLinear& w) { return (w.rows + kRowLaneRows - 1) / kRowLaneRows; }

size_t record_bytes(const PackedLinear& w) {
  return static_cast<size_t>(row_groups(w) * (w.K_x / kRowLaneWindow) * kPairsPerWindow * kRowLaneRecordBytes);
}

// Copies per-row arrays (scales, sums) unchanged: rows past w.rows are never read (masked loads).
AlignedBytes copy_of(const AlignedBytes& from) {
  AlignedBytes to = AlignedBytes::zeros(from.size);
  std::memcpy(to.data.get(), from.data.get(), from.size);
  to.size = from.size;
  return to;
}

// The source's kept codes and positions (linear_pack.cc's sparse24 int8 layout: per row and 128-wide
// chunk, 64 codes, value j of group j/2 at the position in field j % 16 of meta word j / 16) moved
// into the row-lane layout. Padding groups keep positions (0, 1) with zero codes, padding rows are
// zero.
std::unique_ptr<PackedLinear> pack_row_lanes(const PackedLinear& w) {
  NMKIT_ASSERT(w.kind == WeightFormat::Sparse24 && w.dtype == DType::I8 && w.K_x % kRowLaneWindow == 0);
  auto form = std::make_unique<PackedLinear>();
  form->kind = WeightFormat::Sparse24;
  form->dtype = DType::I8;
  form->tier = w.tier;
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
  const int64_t chunks = w.K_x / kLinearChunkInt8, windows = w.K_x / kRowLaneWindow;
  const auto* codes = w.values.as<int8_t>();
  const auto* meta = w.meta.as<uint32_t>();
  auto* out = form->values.as<uint8_t>();
  for (int64_t row = 0; row < w.rows; ++row) {
    const int64_t g = row / kRowLaneRows, lane = row % kRowLaneRows;
    const int64_t b = row / kLinearRowBlock, r = row % kLinearRowBlock;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t source = (b * chunks + c) * kLinearRowBlock + r;
      for (int j = 0; j < 64; ++j) {
        const int64_t k = c * kLinearChunkInt8 + 32 * (j / 16) + sparse24_position(meta[source * 4 + j / 16], j % 16);
        const int64_t in_window = (k / 4) % 16;  // the value's 4-group within its window
        uint8_t* record = out + ((g * windows + k / kRowLaneWindow) * kPairsPerWindow + in_window / 2) * kRowLaneRecordBytes;
        const int64_t byte = 4 * lane + 2 * (in_window % 2) + j % 2;
        record[byte] = static_cast<uint8_t>(k % kRowLaneWindow);
        record[64 + byte] = static_cast<uint8_t>(codes[source * 64 + j]);
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
