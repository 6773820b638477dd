// CPU feature detection and the ISA tier that kernels dispatch on (docs/design.md section 8).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "nmkit/status.h"

namespace nmkit {

// Tiers in increasing order; each includes the one below.
//   scalar: any x86-64.
//   avx2:   AVX2 + FMA + F16C + BMI2, with the OS saving YMM state.
//   avx512: AVX-512 F/BW/VL/DQ/VBMI/VBMI2/BF16/VNNI, with the OS saving ZMM and opmask state.
enum class IsaTier { Scalar = 0, Avx2 = 1, Avx512 = 2 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vbmi = false, avx512vbmi2 = false, avx512bf16 = false, avx512vnni = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;  // with OS permission for tile data
  bool os_ymm = false, os_zmm = false;
};

const CpuFeatures& cpu_features();
// The highest tier this machine (CPU and OS) runs.
IsaTier detected_tier();
// Tiers this machine runs, lowest first.
std::vector<IsaTier> supported_tiers();
std::string_view tier_name(IsaTier tier);  // "scalar", "avx2", "avx512"
// "scalar", "avx2", "avx512"; an Error naming the bad value and the accepted ones otherwise.
Result<IsaTier> tier_from_name(std::string_view name);
// The tier kernels use: NMKIT_ISA if set (an Error if unknown or above detected_tier()), else the
// detected one. Read once per process.
Result<IsaTier> active_tier();

}  // namespace nmkit
