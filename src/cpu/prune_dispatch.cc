// Fills the fused prune + pack slots per tier (src/cpu/prune_kernels.h). Only AVX-512 has the kernel:
// its vpcompress and per-lane compare masks are what make one pass pay; the other tiers prune and
// pack by the general path.
#include "cpu/kernel_table.h"

namespace nmkit::cpu {

void fill_prune_kernels(IsaTier tier, PruneKernels& slots) {
  if (tier == IsaTier::Avx512) {
    slots.prune_pack16 = avx512::prune_pack16;
    slots.prune_pack32 = avx512::prune_pack32;
  }
}

}  // namespace nmkit::cpu
