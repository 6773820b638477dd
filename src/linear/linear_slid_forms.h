// Slid weights on the CPU (docs/design.md 5 and 8). A SlideSparse weight exists for 2:4 sparse units; a
// CPU has none, so nmkit runs the slid 2:4 form where it is the fastest, for few tokens: for INT8
// (`SparseLinear::slid`), and for an nm keep:2N f32/bf16 weight with keep = 2N-2 (which
// `SparseLinear::nm` packs slid on AVX-512); larger calls decompress row blocks of the slid weight into
// scratch (decompress_block, src/linear/linear_driver.h) and run the dense GEMM on them with X lifted
// (the plan, src/linear/linear_plan.cc, says from how many tokens).
#pragma once

#include <cstdint>
#include <memory>

#include "cpu/linear_kernels.h"
#include "nmkit/cpu.h"
#include "nmkit/format.h"
#include "nmkit/status.h"

namespace nmkit::cpu {

// Whether SparseLinear::nm packs `pattern` as slid 2:4 f32/bf16 on `tier` (keep = 2N-2, group <= 16),
// for weights of `dtype` (F32 or BF16) and the layer's activation type (docs/design.md 8.4).
bool nm_runs_slid(Pattern pattern, IsaTier tier, DType dtype, bool bf16_activations);

// An nm keep:2N weight (keep = 2N-2) slid onto 2:4 windows and packed as sparse24 over K_prime,
// with its lifting map; kind Sparse24, `pattern` the nm pattern, K the nm weight's K.
Result<std::unique_ptr<PackedLinear>> pack_nm_as_slid(const NMPacked& weight);

// Writes the K_x columns of one token for a slid f32/bf16 weight: x lifted through w.lift_source,
// zero past K_prime.
void lift_token(const PackedLinear& w, const float* x, float* dst);

}  // namespace nmkit::cpu
