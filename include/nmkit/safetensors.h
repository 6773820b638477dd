// safetensors files: memory-mapped, fully validated reading and atomic writing.
// Format: 8-byte little-endian header length n, n bytes of JSON header (name -> {dtype, shape,
// data_offsets: [begin, end)} plus optional "__metadata__": {string: string}), then the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/files.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0;  // offsets into the data section, as in the header
  uint64_t end = 0;
};

using Metadata = std::map<std::string, std::string>;

// A read-only, memory-mapped safetensors file whose header was validated in full on open(): length
// bound (100 MB, as the reference implementation), well-formed JSON without duplicate keys, known
// dtypes, non-negative shapes whose byte size fits 64 bits, offsets inside the file, byte length =
// numel x dtype size, and tensors tiling the data section exactly (no overlaps, no unindexed bytes,
// as the reference requires). Fields of a tensor entry other than dtype/shape/data_offsets are
// ignored. Errors are one line: "PATH: tensor 'NAME': <what> <value>".
// Thread safety: every const member (tensors, find, view, metadata) may be called from any number of
// threads at once; the object itself must not be moved or destroyed while they run.
// Views stay valid while the file object lives. Their data is as aligned as the file makes it: a
// file whose header length is not a multiple of 8, or whose tensors of different element sizes are
// interleaved, gives unaligned views (read them with memcpy or unaligned loads).
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const;
  const std::vector<TensorInfo>& tensors() const;  // in data (offset) order; ties in header order
  const TensorInfo* find(std::string_view name) const;
  TensorView view(const TensorInfo& info) const;
  // An Error "PATH: no tensor 'NAME'" when absent.
  Result<TensorView> view(std::string_view name) const;
  const Metadata& metadata() const;

  struct Impl;  // opaque: defined in src/io

 private:
  explicit SafetensorsFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One tensor to write: fill() writes exactly numel x dtype size bytes at dst (memory of the output
// file itself, so large outputs are produced in place and never held twice).
struct OutputTensor {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::function<Status(std::byte* dst)> fill;

  static OutputTensor copy_of(std::string name, const TensorView& view);   // borrows view.data
  static OutputTensor owning(std::string name, Tensor tensor);
};

struct WriteOptions {
  // Called before tensor i of n is filled (progress display).
  std::function<void(size_t i, size_t n, const OutputTensor&)> on_tensor;
};

// Writes to "PATH.tmp.XXXXXX" in the same folder, then renames onto PATH (include/nmkit/files.h: a
// symlinked PATH is written through to its target; stale temporaries of PATH are removed first). Tensors keep the given
// order, with contiguous offsets; the header is padded with spaces to a multiple of 8 bytes so the
// data section starts 8-byte aligned; "__metadata__" is written first, and only when non-empty.
// The file's blocks are reserved up front (a full disk is an Error, never a SIGBUS in a fill), each
// fill writes straight into a shared mapping of the file, and the file is fsynced before the rename.
// On any error (a failing fill included) the temporary is removed and PATH is untouched. A fill's
// Error is returned unchanged (it should name its tensor); an exception thrown by a fill or by
// on_tensor becomes an Error naming PATH and the tensor.
Status write_safetensors(const std::string& path, const std::vector<OutputTensor>& tensors,
                         const Metadata& metadata = {}, const WriteOptions& options = {});
// The same up to the rename: the file is complete and fsynced under its temporary name, and
// commit() puts it in place. Lets a caller write every output (a checkpoint and its report) before
// the first one replaces anything.
Result<PendingFile> prepare_safetensors(const std::string& path, const std::vector<OutputTensor>& tensors,
                                        const Metadata& metadata = {}, const WriteOptions& options = {});

}  // namespace nmkit
