// Repacking of weights into the kernels' layouts (include/nmkit/linear.h, "Layout:").
#pragma once

#include <memory>

#include "cpu/linear_kernels.h"
#include "nmkit/format.h"
#include "nmkit/quant.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit::cpu {

// f32 and bf16 weights keep their dtype; f16 is widened to f32 (exactly).
Result<std::unique_ptr<PackedLinear>> pack_dense(const TensorView& weight);
Result<std::unique_ptr<PackedLinear>> pack_sparse24(const Sparse24& weight);
Result<std::unique_ptr<PackedLinear>> pack_nm(const NMPacked& weight);

// INT8 (codes in [-127, 127] with per-row scales): K chunks of 128 (K padded to 64: the last chunk
// may be 64 wide), per-row scales and code sums.
// K above 65536 is an Error: the kernels' int32 sums of (code + 128) * code could overflow.
Result<std::unique_ptr<PackedLinear>> pack_dense_int8(const Quantized& weight);
Result<std::unique_ptr<PackedLinear>> pack_sparse24_int8(const QuantizedSparse24& weight);

// Fills streamed_bytes from the packed arrays (values without slack, meta, int8 scales and sums).
void count_streamed_bytes(PackedLinear& packed);

}  // namespace nmkit::cpu
