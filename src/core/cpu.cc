#include "nmkit/cpu.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace nmkit {
namespace {

struct Regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf) {
  Regs r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool bit(unsigned reg, int b) { return (reg >> b) & 1u; }

CpuFeatures detect() {
  CpuFeatures f;
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.ecx, 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  // XCR0: bit 1 SSE, 2 AVX (YMM upper), 5-7 opmask / ZMM_Hi256 / Hi16_ZMM, 17-18 AMX tile state.
  f.os_ymm = (xcr0 & 0x6) == 0x6;
  f.os_zmm = f.os_ymm && (xcr0 & 0xe0) == 0xe0;
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;

  f.fma = bit(l1.ecx, 12) && f.os_ymm;
  f.f16c = bit(l1.ecx, 29) && f.os_ymm;
  const Regs l7 = cpuid(7, 0);
  const Regs l7s1 = cpuid(7, 1);
  f.avx2 = bit(l7.ebx, 5) && f.os_ymm;
  f.bmi2 = bit(l7.ebx, 8);
  f.avx512f = bit(l7.ebx, 16) && f.os_zmm;
  f.avx512dq = bit(l7.ebx, 17) && f.os_zmm;
  f.avx512bw = bit(l7.ebx, 30) && f.os_zmm;
  f.avx512vl = bit(l7.ebx, 31) && f.os_zmm;
  f.avx512vbmi = bit(l7.ecx, 1) && f.os_zmm;
  f.avx512vbmi2 = bit(l7.ecx, 6) && f.os_zmm;
  f.avx512vnni = bit(l7.ecx, 11) && f.os_zmm;
  f.avx512bf16 = bit(l7s1.eax, 5) && f.os_zmm;
  f.amx_bf16 = bit(l7.edx, 22) && os_amx;
  f.amx_tile = bit(l7.edx, 24) && os_amx;
  f.amx_int8 = bit(l7.edx, 25) && os_amx;
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

IsaTier detected_tier() {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c && f.bmi2;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vbmi &&
                      f.avx512vbmi2 && f.avx512bf16 && f.avx512vnni;
  return avx512 ? IsaTier::Avx512 : avx2 ? IsaTier::Avx2 : IsaTier::Scalar;
}

std::vector<IsaTier> supported_tiers() {
  std::vector<IsaTier> tiers;
  for (int t = 0; t <= static_cast<int>(detected_tier()); ++t) tiers.push_back(static_cast<IsaTier>(t));
  return tiers;
}

std::string_view tier_name(IsaTier tier) {
  switch (tier) {
    case IsaTier::Scalar: return "scalar";
    case IsaTier::Avx2: return "avx2";
    case IsaTier::Avx512: return "avx512";
  }
  return "unknown";
}

Result<IsaTier> tier_from_name(std::string_view name) {
  for (IsaTier t : {IsaTier::Scalar, IsaTier::Avx2, IsaTier::Avx512}) {
    if (tier_name(t) == name) return t;
  }
  return Error(ErrorCode::InvalidArgument, "unknown ISA tier " + quote_name(name) + " (expected scalar, avx2 or avx512)");
}

Result<IsaTier> active_tier() {
  static const Result<IsaTier> tier = []() -> Result<IsaTier> {
    const char* env = std::getenv("NMKIT_ISA");
    if (env == nullptr || *env == '\0') return detected_tier();
    const auto forced = tier_from_name(env);
    if (!forced.ok()) {
      return Error("NMKIT_ISA='" + std::string(env) + "' is not one of scalar, avx2, avx512");
    }
    if (static_cast<int>(*forced) > static_cast<int>(detected_tier())) {
      return Error("NMKIT_ISA='" + std::string(env) + "' is not supported by this CPU (best: " +
                   std::string(tier_name(detected_tier())) + ")");
    }
    return *forced;
  }();
  return tier;
}

}  // namespace nmkit
