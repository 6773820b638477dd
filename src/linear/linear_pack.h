// Repacking of weights into the kernels' layouts (include/nmkit/linear.h, "Layout:").
#pragma once

#include <memory>
#include <vector>

#include "cpu/linear_kernels.h"
#include "nmkit/format.h"
#include "nmkit/quant.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit::cpu {

// Dense weights: [rows_i, K] parts of one dtype stacked by rows. pack_dense copies them into rows of
// its own (f32 and bf16 keep their dtype; f16 is widened to f32, exactly); pack_dense_in_place reads
// f32 or bf16 parts where they are, copying nothing, and holds `owner` to keep their memory alive.
Result<std::unique_ptr<PackedLinear>> pack_dense(const std::vector<TensorView>& parts);
Result<std::unique_ptr<PackedLinear>> pack_dense_in_place(const std::vector<TensorView>& parts,
                                                          std::shared_ptr<const void> owner);
Result<std::unique_ptr<PackedLinear>> pack_sparse24(const Sparse24& weight);
Result<std::unique_ptr<PackedLinear>> pack_nm(const NMPacked& weight);

// INT8 (codes in [-127, 127] with per-row scales): dense rows zero-padded to K_x (K rounded up to 64),
// sparse24 records in K chunks of 128 (the last chunk may be 64 wide), or nm records; per-row scales
// and code sums.
// K above 65536 is an Error: the kernels' int32 sums of (code + 128) * code could overflow.
Result<std::unique_ptr<PackedLinear>> pack_dense_int8(const Quantized& weight);
Result<std::unique_ptr<PackedLinear>> pack_sparse24_int8(const QuantizedSparse24& weight);
// An nm weight's values quantized per row (`values`: codes [rows, groups * keep] and scales, as
// quantize_weights gives them for weight.values) in the nm records of an f32 weight, superchunks of
// lcm(group, 64) K: 64 K are one mask word and the codes that one vpexpandb places.
Result<std::unique_ptr<PackedLinear>> pack_nm_int8(const NMPacked& weight, const Quantized& values);

// Fills streamed_bytes from the packed arrays (values without slack, meta, int8 scales and sums).
void count_streamed_bytes(PackedLinear& packed);

}  // namespace nmkit::cpu
