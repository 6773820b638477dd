// The GGUF side of `nmkit inspect` (issue 10 part 5): which format a file is, and the report of a
// GGUF file's tensors, each dequantized (docs/design.md section 11.1) to count zeros and find the
// sparsest N:M pattern it complies with.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <fmt/core.h>

#include "nmkit/format.h"
#include "nmkit/gguf.h"
#include "tools/nmkit/inspect_logic.h"

namespace nmkit::cli {

Result<FileKind> sniff_file_kind(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  unsigned char head[9] = {};
  size_t got = 0;
  while (got < sizeof(head)) {
    const ssize_t n = ::read(fd, head + got, sizeof(head) - got);
    if (n <= 0) break;  // end of file, or a folder/unreadable file: the readers below say which
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got >= 4 && std::memcmp(head, "GGUF", 4) == 0) return FileKind::Gguf;
  // safetensors: an 8-byte header length, then a JSON object, which the format requires to start
  // with '{' right away.
  if (got == sizeof(head) && head[8] == '{') return FileKind::Safetensors;
  std::string start;
  for (size_t i = 0; i < std::min<size_t>(got, 8); ++i) start += fmt::format("{}{:02x}", i ? " " : "", head[i]);
  return Error(fmt::format("{}: not a safetensors or GGUF file (it starts with bytes [{}])", path, start));
}

Result<std::vector<InspectedTensor>> inspect_gguf(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file.ok()) return file.error();
  std::vector<InspectedTensor> result;
  for (const GgufTensorInfo& info : file->tensors()) {
    InspectedTensor out;
    out.name = info.name;
    out.stored_type = std::string(ggml_type_name(info.type));
    out.dtype = DType::F32;  // what it dequantizes to
    out.shape = info.shape();
    out.parts = {info.name};
    out.stored_bytes = static_cast<size_t>(info.nbytes);
    if (ggml_can_dequantize(info.type)) {
      auto values = file->dequantize(info);
      if (!values.ok()) return values.error();
      const TensorView view = values->view();
      out.zeros = std::count(values->as<float>(), values->as<float>() + values->numel(), 0.0f);
      out.checked = view.shape.size() == 2;
      if (out.checked) out.sparsest = sparsest_compliant(view, inspect_candidates());
    }
    result.push_back(std::move(out));
  }
  return result;
}

}  // namespace nmkit::cli
