// libFuzzer target: the GGUF reader (src/io/gguf_parse.cc on any bytes; then GgufFile::open and the
// dequantization of every tensor on what it accepts; Tokenizer::from_gguf is declared in
// nmkit/tokenizer.h but not defined yet on main, add it here when it is). Refusals are fine; a
// crash, hang, leak or sanitizer report is a bug, and so is a dequantized tensor of another size
// than its info says.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "nmkit/gguf.h"
#include "src/io/gguf_parse.h"

namespace {

int memory_file() {
  static const int fd = memfd_create("nmkit_fuzz_gguf", 0);
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = nmkit::io::parse_gguf("fuzz.gguf", reinterpret_cast<const std::byte*>(data), size);
  if (!parsed.ok()) return 0;
  const int fd = memory_file();
  if (fd < 0 || ftruncate(fd, 0) != 0) return 0;
  for (size_t done = 0; done < size;) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) return 0;
    done += static_cast<size_t>(n);
  }
  auto file = nmkit::GgufFile::open("/proc/self/fd/" + std::to_string(fd));
  if (!file.ok()) __builtin_trap();  // parse_gguf accepted these very bytes
  for (const nmkit::GgufTensorInfo& info : file->tensors()) {
    auto dense = file->dequantize(info);
    if (dense.ok() && dense->shape() != info.shape()) __builtin_trap();
  }
  return 0;
}
