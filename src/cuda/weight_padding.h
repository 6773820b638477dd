// The weight's codes widened to the padded sizes of the device layouts (src/cuda/device_layout.h):
// host code, tested in CI (tests/cuda/weight_padding_test.cc).
#pragma once

#include <cstdint>

#include "nmkit/format.h"
#include "nmkit/tensor.h"

namespace nmkit::cuda {

// [rows, K] one-byte codes into [rows_new, K_new], zero-padded (rows_new >= rows, K_new >= K).
Tensor pad_codes(const Tensor& codes, int64_t K_new, int64_t rows_new);
// sparse24 codes (any one- or two-byte dtype) widened to K_new >= K (a multiple of 4): the added
// groups are what the format's fill rule names for no non-zero (nibble 0x4, zero values), so the
// result decompresses to the weight with zero columns appended.
Sparse24 pad_sparse24(const Sparse24& s, int64_t K_new);

}  // namespace nmkit::cuda
