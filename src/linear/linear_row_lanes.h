// The row-lane form of a sparse24 INT8 or bf16 weight (docs/design.md 8.4), the layout of the tier's
// row-lane kernels (cpu/linear_kernels.h): rows in groups of kRowLaneRows = 16 (zero rows pad the
// last), K_x in windows of kRowLaneWindowBytes = 64 bytes of activations (64 INT8 or 32 bf16 K),
// kRowLaneRecords = 8 records of kRowLaneRecordBytes = 128 bytes per row group and window: 64 bytes
// of positions, then 64 of kept values, 4 bytes per row (bytes 4r..4r+3 belong to row 16g + r). An
// INT8 record covers a pair of 4-groups (2p, 2p + 1) of the window: each row's two kept codes of
// group 2p, then of group 2p + 1 (sparse24 order), with their positions in the window as bytes
// (0..63). A bf16 record covers one 4-group q: each row's two kept values and their positions as
// 16-bit words (0..31). Shape (rows_pad/16, K_x * size / 64, 8, 2, 64) bytes: 2 bytes per kept
// INT8 code, 4 per bf16 value, as many as the dense weight (2-bit positions decoded once per
// 12-token block ran 17-30% slower at 16-256 tokens: the decode's vpmultishiftqb competes with the
// gathers).
// Per-row scales, code sums and bias as the source's. The form's row_blocks count 16-row groups.
#pragma once

#include <cstddef>

#include "cpu/linear_kernels.h"

namespace nmkit::cpu {

// The row-lane form of w (kind Sparse24, dtype I8 or BF16), built by the first call that asks
// (thread-safe). Carries w's tier, bf16-activation choice, slide geometry and bias.
const PackedLinear& row_lanes_form(const PackedLinear& w);

// Bytes one call on w's row-lane form streams (built or not): its records, scales and sums.
size_t row_lanes_bytes(const PackedLinear& w);

}  // namespace nmkit::cpu
