#include "cpu/kernel_table.h"

#include <array>
#include <mutex>

namespace nmkit::cpu {

const KernelTable& kernels_for(IsaTier tier) {
  NMKIT_ASSERT(static_cast<int>(tier) <= static_cast<int>(detected_tier()));
  static std::array<KernelTable, 3> tables;
  static std::array<std::once_flag, 3> built;
  const auto index = static_cast<size_t>(tier);
  std::call_once(built[index], [&] {
    KernelTable& table = tables[index];
    table.tier = tier;
    fill_quant_kernels(tier, table.quant);
    fill_linear_kernels(tier, table.linear);
    fill_activation_kernels(tier, table.activation);
    fill_prune_kernels(tier, table.prune);
  });
  return tables[index];
}

Result<const KernelTable*> kernels() {
  auto tier = active_tier();  // read once per process
  if (!tier.ok()) return tier.error();
  return &kernels_for(*tier);
}

}  // namespace nmkit::cpu
