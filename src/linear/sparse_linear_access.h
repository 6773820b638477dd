// SparseLinear's insides for the library's own modules that build a layer from packed records or
// read them back (src/linear/linear_records.cc): defined in sparse_linear.cc, where the layer's
// state is.
#pragma once

#include <memory>

#include "cpu/linear_kernels.h"
#include "nmkit/linear.h"

namespace nmkit {

struct SparseLinearAccess {
  // The layer over `packed` on the tier `options` choose, with the checks every constructor makes
  // (a kernel for the form on that tier, bf16 activations not on int8 weights).
  static Result<SparseLinear> finish(Result<std::unique_ptr<cpu::PackedLinear>> packed, const LinearOptions& options);
  static SparseLinear make(std::unique_ptr<cpu::PackedLinear> packed, const LinearOptions& options);
  static const cpu::PackedLinear& packed(const SparseLinear& layer);
};

}  // namespace nmkit
