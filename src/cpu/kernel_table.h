// The one dispatch table of per-ISA kernels (docs/design.md section 8). Each kernel family declares its
// slots in its own header and fills them per tier in its own dispatch file.
#pragma once

#include "cpu/activation_kernels.h"
#include "cpu/linear_kernels.h"
#include "cpu/prune_kernels.h"
#include "cpu/quant_kernels.h"
#include "nmkit/cpu.h"
#include "nmkit/status.h"

namespace nmkit::cpu {

struct KernelTable {
  IsaTier tier = IsaTier::Scalar;
  QuantKernels quant;
  LinearKernels linear;
  ActivationKernels activation;
  PruneKernels prune;
};

// The table of the active tier (NMKIT_ISA, else the best detected), built once. An NMKIT_ISA that
// names an unknown or unsupported tier is the Error of active_tier(), returned to every call that
// needs the table (the library never exits).
Result<const KernelTable*> kernels();
// The table of any tier this machine runs (tests compare every tier against the reference).
const KernelTable& kernels_for(IsaTier tier);

// Implemented by each kernel family's dispatch file.
void fill_quant_kernels(IsaTier tier, QuantKernels& slots);
void fill_linear_kernels(IsaTier tier, LinearKernels& slots);
void fill_activation_kernels(IsaTier tier, ActivationKernels& slots);
void fill_prune_kernels(IsaTier tier, PruneKernels& slots);

}  // namespace nmkit::cpu
