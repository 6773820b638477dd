// The table `nmkit inspect` prints (the rows come from include/nmkit/inspect.h, also used by
// `nmkit demo` to check its outputs).
#pragma once

#include <string>
#include <vector>

#include "nmkit/inspect.h"

namespace nmkit::cli {

std::string inspect_table(const std::vector<InspectedTensor>& tensors);

}  // namespace nmkit::cli
