// The executable's global operator new (the plain and the aligned form; libstdc++'s array and
// nothrow forms call these): libstdc++'s own, plus the size of a failed request recorded for the
// out-of-memory line (tools/nmkit/memory.h). Memory comes from malloc / posix_memalign, so
// libstdc++'s operator delete (free) releases it. Only the CLI replaces it: the library leaves its
// users' allocator alone. (The CLI is not built under the sanitizers, whose operator new this would
// override.)
#include <cstdlib>
#include <new>

#include "tools/nmkit/memory.h"

namespace {

[[noreturn]] void fail(std::size_t size) {
  nmkit::cli::record_failed_allocation(size);
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t size) {
  if (size == 0) size = 1;
  for (;;) {
    if (void* p = std::malloc(size)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) fail(size);
    handler();
  }
}

void* operator new(std::size_t size, std::align_val_t alignment) {
  const auto align = static_cast<std::size_t>(alignment) < sizeof(void*) ? sizeof(void*)
                                                                          : static_cast<std::size_t>(alignment);
  if (size == 0) size = 1;
  for (;;) {
    void* p = nullptr;
    if (::posix_memalign(&p, align, size) == 0) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) fail(size);
    handler();
  }
}
