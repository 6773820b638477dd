// docs/design.md 12, "BLAS kernels": OpenBLAS's fallback to Prescott on a CPU it does not know.
#include "calib/blas_kernels.h"

#include <cblas.h>  // OpenBLAS's: openblas_get_corename

#include <cstdlib>
#include <cstring>
#include <mutex>

// Exported by DYNAMIC_ARCH builds of OpenBLAS only: weak, so that another build links and the
// re-selection is skipped. gotoblas_dynamic_init picks the kernels again (reading
// OPENBLAS_CORETYPE) once gotoblas_dynamic_quit has cleared the choice made at load.
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace nmkit::calib_detail {
namespace {

// OpenBLAS's name for the widest kernels the CPU (and the OS's saved vector state) can run.
const char* kernels_for_this_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

std::string current_kernels() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "";
}

}  // namespace

std::string select_blas_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr) return;
    if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice
    if (current_kernels() != "Prescott") return;               // a CPU OpenBLAS knows
    const char* wanted = kernels_for_this_cpu();
    if (wanted == nullptr) return;  // a CPU without AVX2: Prescott's kernels may be right
    // OpenBLAS reads its choice from the environment only; set it for the one call, not for the
    // processes nmkit starts later.
    setenv("OPENBLAS_CORETYPE", wanted, 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
  });
  return current_kernels();
}

}  // namespace nmkit::calib_detail
