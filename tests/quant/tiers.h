// ISA tiers a quantization test runs: the one NMKIT_ISA forces (ctest runs the suite once per tier),
// else every tier this machine runs.
#pragma once

#include <cstdlib>
#include <vector>

#include "nmkit/cpu.h"

namespace nmkit::test {

inline std::vector<IsaTier> tiers_under_test() {
  if (const char* env = std::getenv("NMKIT_ISA"); env != nullptr && *env != '\0') {
    auto tier = active_tier();
    if (!tier.ok()) return {};
    return {*tier};
  }
  return supported_tiers();
}

}  // namespace nmkit::test
