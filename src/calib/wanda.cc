// Wanda (Sun et al. 2023) is section 2's activation-aware score |w| * a[k]: the norms come from the
// calibration pass (docs/design.md section 12) and the existing prune() does the rest.
#include <string>

#include "nmkit/calib.h"

namespace nmkit {

Result<PruneResult> wanda_prune(const TensorView& w, const std::vector<float>& act_norms,
                                Pattern pattern, std::string_view name) {
  const TensorView a{DType::F32, Shape{static_cast<int64_t>(act_norms.size())},
                     reinterpret_cast<const std::byte*>(act_norms.data())};
  ScoreInputs inputs;
  inputs.act_norms = &a;
  return prune(w, pattern, PruneMethod::Wanda, inputs, name);
}

}  // namespace nmkit
