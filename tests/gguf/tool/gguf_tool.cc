// Test driver for the python oracle tests of tests/gguf (the C++ side of each comparison):
//   gguf_tool check FILE                      open FILE; print "ok" or the one-line error (exit 1)
//   gguf_tool copy IN OUT                    writes OUT with IN's metadata and every tensor's stored
//       bytes unchanged (GgufOutputTensor::copy_of), in IN's order and alignment
//   gguf_tool dequantize IN OUT [--as F32|F16|BF16] [NAME...]
//       writes OUT with IN's metadata (in order) and every tensor of IN (or only the NAMEs, in IN's
//       order) dequantized to f32 by GgufFile::dequantize, then stored as the --as dtype by
//       write_gguf; the python side compares the values with gguf.quants.dequantize and reads OUT
//       back with gguf.GGUFReader.
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "nmkit/dtype.h"
#include "nmkit/gguf.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return 1;
}

int check(const std::string& path) {
  auto file = nmkit::GgufFile::open(path);
  if (!file.ok()) return fail(file.error().message());
  std::printf("ok %zu tensors %zu keys\n", file->tensors().size(), file->metadata().size());
  return 0;
}

int dequantize(const std::vector<std::string>& args) {
  if (args.size() < 2) return fail("usage: gguf_tool dequantize IN OUT [--as F32|F16|BF16] [NAME...]");
  nmkit::DType as = nmkit::DType::F32;
  std::set<std::string> names;
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--as" && i + 1 < args.size()) {
      const auto dtype = nmkit::dtype_from_name(args[++i]);
      if (!dtype.ok() || !nmkit::is_prunable(*dtype)) return fail("--as: F32, F16 or BF16");
      as = *dtype;
    } else {
      names.insert(args[i]);
    }
  }
  auto file = nmkit::GgufFile::open(args[0]);
  if (!file.ok()) return fail(file.error().message());
  std::vector<nmkit::OutputTensor> tensors;
  for (const nmkit::GgufTensorInfo& info : file->tensors()) {
    if (!names.empty() && names.count(info.name) == 0) continue;
    auto values = file->dequantize(info);
    if (!values.ok()) return fail(values.error().message());
    nmkit::Tensor stored = nmkit::Tensor::empty(as, info.shape());
    nmkit::convert_from_f32(as, values->as<float>(), stored.data(), static_cast<size_t>(values->numel()));
    tensors.push_back(nmkit::OutputTensor::owning(info.name, std::move(stored)));
  }
  nmkit::GgufWriteOptions options;
  options.alignment = file->alignment();
  const nmkit::Status status = nmkit::write_gguf(args[1], file->metadata(), tensors, options);
  if (!status.ok()) return fail(status.error().message());
  return 0;
}

int copy(const std::string& in, const std::string& out) {
  auto file = nmkit::GgufFile::open(in);
  if (!file.ok()) return fail(file.error().message());
  std::vector<nmkit::GgufOutputTensor> tensors;
  for (const nmkit::GgufTensorInfo& info : file->tensors()) tensors.push_back(nmkit::GgufOutputTensor::copy_of(*file, info));
  nmkit::GgufWriteOptions options;
  options.alignment = file->alignment();
  const nmkit::Status status = nmkit::write_gguf(out, file->metadata(), tensors, options);
  if (!status.ok()) return fail(status.error().message());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "check") return check(args[1]);
  if (args.size() == 3 && args[0] == "copy") return copy(args[1], args[2]);
  if (!args.empty() && args[0] == "dequantize") return dequantize({args.begin() + 1, args.end()});
  return fail("usage: gguf_tool check FILE | gguf_tool copy IN OUT | gguf_tool dequantize IN OUT [--as F32|F16|BF16] [NAME...]");
}
