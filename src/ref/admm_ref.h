// The scalar definition of ADMM N:M mask search (docs/design.md 12.1) that src/calib/admm.cc is
// tested against: float64 throughout, B = Wn Hn formed explicitly, each W step a Cholesky solve
// with A = Hn + rho I per row, the projection by sorting.
#pragma once

#include <cstdint>
#include <vector>

#include "nmkit/calib.h"
#include "nmkit/pattern.h"

namespace nmkit {

struct AdmmRefResult {
  std::vector<double> values;  // [rows, K]: Z D^-1 (0 where pruned)
  std::vector<uint8_t> kept;   // [rows, K]: the final mask
};

// w [rows, K] row-major; H K x K (upper triangle read); options as admm_prune's (double_precision
// ignored). The caller passes valid inputs (finite, rho > 0, iterations >= 1).
AdmmRefResult ref_admm(const std::vector<float>& w, int64_t rows, int64_t K, const std::vector<double>& H,
                       Pattern pattern, const AdmmOptions& options);

}  // namespace nmkit
