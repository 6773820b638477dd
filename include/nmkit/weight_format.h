// How a weight is stored: the one name for it in checkpoints (include/nmkit/checkpoint.h), in
// SparseLinear (include/nmkit/linear.h) and in the packed layouts of the kernels (src/cpu).
#pragma once

namespace nmkit {

enum class WeightFormat { Dense, Sparse24, NM };

}  // namespace nmkit
