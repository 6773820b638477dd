// Scalar reference of the fused magnitude prune + pack (src/cpu/prune_kernels.h): docs/design.md
// sections 2 and 4.2/4.3 written out group by group, the definition each tier's kernel is compared
// against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu/prune_kernels.h"

namespace nmkit {

// One row of row.K elements of `esize` bytes (2 or 4) at src: pruned to row.keep of every row.group
// by |w| (a strictly larger magnitude wins, an equal one goes to the lower index; a tail group keeps
// min(keep, its real elements)), pruned elements +0; then packed: each group's non-zeros, padded with
// its lowest zero positions (padding positions count as zeros and hold +0) to keep, their values in
// order into `values` and their positions into `bits` (nm mask bits, or sparse24 nibbles
// first | second << 2). Returns false when a value is NaN or infinite (|bits| >= row.non_finite).
bool ref_prune_pack_row(const cpu::PrunePackRow& row, const std::byte* src, size_t esize, std::byte* values,
                        uint8_t* bits);

}  // namespace nmkit
