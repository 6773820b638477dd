// Files: safetensors read in place (read-only views of the mapping) and written atomically, and the
// rows of `nmkit inspect` (include/nmkit/safetensors.h, include/nmkit/inspect.h).
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>

#include <memory>
#include <vector>

#include "bindings.h"

namespace nmkit::python {
namespace {

// Keeps a mapped file alive while any array viewing it lives.
struct MappedSafetensors {
  std::unique_ptr<SafetensorsFile> file;
};

}  // namespace

void bind_io(nb::module_& m) {
  nb::class_<MappedSafetensors>(m, "_MappedSafetensors", "A memory-mapped safetensors file (arrays' owner).");

  m.def(
      "load_safetensors",
      [](const std::filesystem::path& path) {
        MappedSafetensors mapped;
        mapped.file = std::make_unique<SafetensorsFile>(
            unwrap(LongCall().run([&] { return SafetensorsFile::open(path.string()); })));
        const SafetensorsFile& file = *mapped.file;
        nb::object owner = nb::cast(std::move(mapped));
        nb::dict tensors;
        for (const TensorInfo& info : file.tensors()) {
          tensors[nb::str(info.name.c_str(), info.name.size())] =
              array_view(file.view(info), owner, Framework::Numpy, true);
        }
        return tensors;
      },
      nb::arg("path"),
      nb::sig("def load_safetensors(path: str | os.PathLike) -> dict[str, numpy.typing.NDArray[typing.Any]]"),
      R"(Opens a safetensors file (the whole header validated) and returns {name: array}: read-only
numpy arrays viewing the file's memory mapping, in file order; the mapping lives while any of them
does. numpy has no bfloat16 or float8: BF16 tensors come as uint16 and F8 ones as uint8 arrays of
their bits (torch.from_numpy(a.copy()).view(torch.bfloat16) restores bfloat16).)");

  m.def(
      "save_safetensors",
      [](const std::filesystem::path& path, nb::dict tensors,
         std::optional<std::map<std::string, std::string>> metadata) {
        std::vector<ArrayIn> arrays;
        std::vector<OutputTensor> outputs;
        arrays.reserve(tensors.size());
        for (auto [key, value] : tensors) {
          if (!nb::isinstance<nb::str>(key)) raise_argument("save_safetensors: tensor names must be str");
          const std::string name = nb::cast<std::string>(key);
          arrays.push_back(array_in(value, name.c_str()));
          outputs.push_back(OutputTensor::copy_of(name, arrays.back().view));
        }
        Metadata meta;
        if (metadata) meta.insert(metadata->begin(), metadata->end());
        LongCall call;
        WriteOptions options;
        options.on_tensor = [&call](size_t i, size_t n, const OutputTensor&) {
          call.notify("write", static_cast<int64_t>(i) + 1, static_cast<int64_t>(n));
        };
        check(call.run([&] { return write_safetensors(path.string(), outputs, meta, options); }));
      },
      nb::arg("path"), nb::arg("tensors"), nb::arg("metadata") = nb::none(),
      nb::sig("def save_safetensors(path: str | os.PathLike, tensors: collections.abc.Mapping[str, "
              "numpy.typing.ArrayLike], metadata: collections.abc.Mapping[str, str] | None = None) -> None"),
      R"(Writes {name: array} (numpy or torch CPU, C-contiguous; any dtype safetensors knows, torch
bfloat16 included) as a safetensors file, in the mapping's order, with the optional string metadata.
Atomic: written to a temporary beside ``path`` and renamed; on any error or Ctrl-C nothing is left.)");
}

}  // namespace nmkit::python
