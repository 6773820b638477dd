// The row-lane form of an INT8 sparse24 weight (docs/design.md 8.4), the layout of the tier's
// sparse24_i8_row_lanes kernel (cpu/linear_kernels.h): rows in groups of kRowLaneRows = 16 (zero rows
// pad the last), K_x in windows of kRowLaneWindow = 64, each window's 16 4-groups in 8 pairs
// (2p, 2p + 1). Per row group, window and pair, one kRowLaneRecordBytes = 128 byte record: 64
// position bytes, then 64 codes; bytes 4r..4r+3 belong to row 16g + r: its two kept codes of group
// 2p, then of group 2p + 1 (sparse24 order), and their K positions within the window (0..63).
// Shape (rows_pad/16, K_x/64, 8, 2, 64) bytes: 2 bytes per kept code, against 1.25 in the blocked
// sparse24 int8 layout (2-bit positions decoded per token block ran 17-30% slower at 16-256 tokens:
// the decode's vpmultishiftqb competes with the gathers). Per-row scales, code sums and bias as the
// source's. The form's row_blocks count 16-row groups.
#pragma once

#include <cstddef>

#include "cpu/linear_kernels.h"

namespace nmkit::cpu {

// The row-lane form of w (kind Sparse24, dtype I8, slid or not), built by the first call that asks
// (thread-safe). Carries w's tier, slide geometry (X is lifted while quantized, as for w) and bias.
const PackedLinear& row_lanes_form(const PackedLinear& w);

// Bytes one call on w's row-lane form streams (built or not): its records, scales and sums.
size_t row_lanes_bytes(const PackedLinear& w);

}  // namespace nmkit::cpu
