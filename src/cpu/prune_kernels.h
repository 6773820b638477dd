// Slots of the fused magnitude prune + pack kernel (docs/design.md 2, "Pruning into a compressed
// format", and 8.2): one row of a weight in its own dtype, pruned to keep:group by |w| and written
// straight into its rows of an nm or sparse24 tensor, in one pass over the row.
//
// What a tier computes is what prune (magnitude) followed by compress_nm / compress_sparse24 computes,
// byte for byte (the reference is src/ref/prune_pack_ref.cc): the keep largest |w| of every group,
// ties to the lower index, a tail group keeping at most its real elements, pruned elements +0; then
// each group's non-zeros padded with its lowest zero positions to `keep` (so a kept +-0 may give its
// slot to an earlier pruned position), values in order, padding positions +0.
//
// Tier translation units follow the rules of quant_kernels.h (intrinsics, plain loops, libc calls,
// functions in an anonymous namespace only). A tier without the kernel leaves the slot null and the
// caller prunes and packs by the general path (src/prune/prune.cc, src/format).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nmkit::cpu {

struct PrunePackRow {
  int64_t K = 0;           // elements of the row
  int keep = 0, group = 0;  // the pattern; group 2, 4, 8 or 16
  bool sparse24 = false;   // write sparse24 meta nibbles (pattern 2:4) instead of nm mask bits
  uint32_t magnitude = 0;  // the bits that make a value non-zero: 0x7FFF (bf16, f16), 0x7FFFFFFF (f32)
  uint32_t non_finite = 0; // |bits| at or above this are NaN or infinity: 0x7F80, 0x7C00, 0x7F800000
};

// Prunes and packs one row of `row.K` 16-bit (bf16, f16) elements: `values` gets groups * keep
// elements (sparse24: groups * 2), `bits` the row's ceil(K_pad / 8) bytes of mask bits or meta
// nibbles, K_pad = groups * group. Returns false, with the outputs undefined, when the row holds a NaN
// or an infinity (the caller then finds and reports the first one).
using PrunePack16Fn = bool (*)(const PrunePackRow& row, const uint16_t* src, uint16_t* values, uint8_t* bits);
// The same for 32-bit (f32) elements.
using PrunePack32Fn = bool (*)(const PrunePackRow& row, const uint32_t* src, uint32_t* values, uint8_t* bits);

struct PruneKernels {
  PrunePack16Fn prune_pack16 = nullptr;
  PrunePack32Fn prune_pack32 = nullptr;
};

namespace avx512 {
bool prune_pack16(const PrunePackRow& row, const uint16_t* src, uint16_t* values, uint8_t* bits);
bool prune_pack32(const PrunePackRow& row, const uint32_t* src, uint32_t* values, uint8_t* bits);
}  // namespace avx512

}  // namespace nmkit::cpu
