// libFuzzer target: a whole safetensors file read as a checkpoint (list_stored, load_weight) with
// every compressed weight validated and decompressed (src/format/sparse24.cc, nm.cc). Refusals are
// fine; a crash, hang (issue 13 C1: [2^48, 0] looped for days), leak or sanitizer report is a bug,
// and so is a weight that validates but decompresses to a tensor breaking its pattern or shape.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "nmkit/checkpoint.h"
#include "nmkit/format.h"
#include "nmkit/safetensors.h"

namespace {

// The file lives in memory (memfd), opened by its /proc path as a user's file would be.
int memory_file() {
  static const int fd = memfd_create("nmkit_fuzz", 0);
  return fd;
}

void check_dense(const nmkit::Tensor& dense, int64_t rows, int64_t K, nmkit::Pattern pattern) {
  if (dense.shape() != nmkit::Shape{rows, K}) __builtin_trap();
  if (nmkit::find_violation(dense.view(), pattern)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memory_file();
  if (fd < 0 || ftruncate(fd, 0) != 0) return 0;
  for (size_t done = 0; done < size;) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) return 0;
    done += static_cast<size_t>(n);
  }
  auto file = nmkit::SafetensorsFile::open("/proc/self/fd/" + std::to_string(fd));
  if (!file.ok()) return 0;
  auto stored = nmkit::list_stored(*file);
  if (!stored.ok()) return 0;
  for (const nmkit::StoredTensor& st : *stored) {
    auto loaded = nmkit::load_weight(*file, st);
    if (!loaded.ok() || !st.record) continue;
    if (const auto* s = std::get_if<nmkit::Sparse24>(&*loaded)) {
      check_dense(nmkit::decompress(*s), s->rows(), s->K, nmkit::Pattern{2, 4});
    } else if (const auto* m = std::get_if<nmkit::NMPacked>(&*loaded)) {
      check_dense(nmkit::decompress(*m), m->rows(), m->K, m->pattern);
    }
  }
  return 0;
}
