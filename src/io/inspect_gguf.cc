// The GGUF side of inspect_file (include/nmkit/inspect.h; issue 10 part 5): which format a file is, and the report of a
// GGUF file's tensors, each dequantized (docs/design.md section 11.1) to count zeros and find the
// sparsest N:M pattern it complies with.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <cstdio>

#include "nmkit/format.h"
#include "nmkit/gguf.h"
#include "nmkit/inspect.h"

namespace nmkit {

Result<FileKind> sniff_file_kind(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return Error(err == ENOENT ? ErrorCode::NotFound : ErrorCode::Io, "cannot open: " + std::string(std::strerror(err)))
        .with_file(path);
  }
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
  for (size_t i = 0; i < std::min<size_t>(got, 8); ++i) {
    char byte[4];
    std::snprintf(byte, sizeof(byte), "%02x", head[i]);
    if (i > 0) start += ' ';
    start += byte;
  }
  return Error(ErrorCode::InvalidFile, "not a safetensors or GGUF file (it starts with bytes [" + start + "])")
      .with_file(path);
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

}  // namespace nmkit
