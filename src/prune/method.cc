// Names of the pruning methods as the CLI and reports spell them.
#include <string>

#include "nmkit/prune.h"

namespace nmkit {

Result<PruneMethod> parse_prune_method(std::string_view text) {
  if (text == "magnitude") return PruneMethod::Magnitude;
  if (text == "gradient") return PruneMethod::Gradient;
  if (text == "wanda") return PruneMethod::Wanda;
  return Error(ErrorCode::InvalidArgument, "unknown pruning method '" + std::string(text) +
               "' (expected magnitude, gradient or wanda)");
}

std::string_view prune_method_name(PruneMethod method) {
  switch (method) {
    case PruneMethod::Magnitude: return "magnitude";
    case PruneMethod::Gradient: return "gradient";
    case PruneMethod::Wanda: return "wanda";
  }
  return "unknown";
}

}  // namespace nmkit
