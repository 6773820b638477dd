#include "tools/nmkit/inspect_logic.h"

#include <fmt/core.h>

#include "tools/nmkit/cli_util.h"

namespace nmkit::cli {

std::string inspect_table(const std::vector<InspectedTensor>& tensors) {
  Table table({"tensor", "dtype", "shape", "format", "pattern", "zeros", "sparsest", "complies", "bytes"});
  for (const auto& t : tensors) {
    table.add_row({t.name, t.stored_type.empty() ? std::string(dtype_name(t.dtype)) : t.stored_type, shape_str(t.shape), t.format(),
                   t.record ? t.record->pattern.str() : "-", fmt::format("{:.2f}%", 100.0 * t.zero_fraction()),
                   !t.checked ? "-" : (t.sparsest ? t.sparsest->str() : "none"),
                   t.complies ? (*t.complies ? "yes" : "NO") : "-",
                   human_bytes(static_cast<double>(t.stored_bytes))});
  }
  return table.render();
}

}  // namespace nmkit::cli
