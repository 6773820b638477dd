#include "cuda/cusparselt_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <vector>

#ifndef NMKIT_CUSPARSELT_FALLBACK
#define NMKIT_CUSPARSELT_FALLBACK ""
#endif

namespace nmkit::cuda {

Result<const CusparseLtApi*> cusparselt_api() {
  static std::once_flag once;
  static CusparseLtApi table;
  static std::optional<Error> failure;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("NMKIT_CUSPARSELT"); env != nullptr && *env != '\0') {
      candidates.emplace_back(env);
    } else {
      candidates = {"libcusparseLt.so.0", NMKIT_CUSPARSELT_FALLBACK};
    }
    void* lib = nullptr;
    std::string tried;
    for (const std::string& path : candidates) {
      if (path.empty()) continue;
      lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) {
        table.path = path;
        break;
      }
      tried += (tried.empty() ? "" : "; ") + std::string(dlerror());
    }
    if (lib == nullptr) {
      failure = Error(ErrorCode::NotFound, "cuSPARSELt: cannot load libcusparseLt.so.0 (" + tried +
                                               "); set NMKIT_CUSPARSELT to its path");
      return;
    }
#define NMKIT_RESOLVE(name)                                                                        \
  table.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));                             \
  if (table.name == nullptr && !failure) {                                                         \
    failure = Error(ErrorCode::Unsupported, "cuSPARSELt: " + table.path + " has no " #name);       \
  }
    NMKIT_CUSPARSELT_ENTRY_POINTS(NMKIT_RESOLVE)
#undef NMKIT_RESOLVE
  });
  if (failure) return *failure;
  return &table;
}

Status sparselt_status(const CusparseLtApi& lt, cusparseStatus_t status, const char* what) {
  if (status == CUSPARSE_STATUS_SUCCESS) return ok_status();
  return Error(ErrorCode::Unsupported, std::string("cuSPARSELt: ") + what + ": " + lt.cusparseLtGetErrorName(status));
}

}  // namespace nmkit::cuda
