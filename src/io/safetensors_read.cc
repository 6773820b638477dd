// SafetensorsFile: a validated header over a read-only mapping of the file.
#include <map>
#include <utility>

#include "io/mapped_file.h"
#include "io/safetensors_header.h"
#include "io/text.h"
#include "nmkit/safetensors.h"

namespace nmkit {

struct SafetensorsFile::Impl {
  std::string path;
  io::MappedFile map;
  std::vector<TensorInfo> tensors;
  Metadata metadata;
  const std::byte* data = nullptr;  // start of the data section
  std::map<std::string, size_t, std::less<>> index;  // name -> position in `tensors`
};

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto map = io::MappedFile::open_read(path);
  if (!map.ok()) return map.error();
  auto header = io::parse_safetensors_header(path, map->data(), map->size());
  if (!header.ok()) return header.error().classified(ErrorCode::InvalidFile);

  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->map = std::move(map.value());
  impl->tensors = std::move(header->tensors);
  impl->metadata = std::move(header->metadata);
  impl->data = impl->map.data() + header->data_start;
  for (size_t i = 0; i < impl->tensors.size(); ++i) impl->index.emplace(impl->tensors[i].name, i);
  return SafetensorsFile(std::move(impl));
}

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

const std::string& SafetensorsFile::path() const { return impl_->path; }
const std::vector<TensorInfo>& SafetensorsFile::tensors() const { return impl_->tensors; }
const Metadata& SafetensorsFile::metadata() const { return impl_->metadata; }

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = impl_->index.find(name);
  return it == impl_->index.end() ? nullptr : &impl_->tensors[it->second];
}

TensorView SafetensorsFile::view(const TensorInfo& info) const {
  return TensorView{info.dtype, info.shape, impl_->data + info.begin};
}

Result<TensorView> SafetensorsFile::view(std::string_view name) const {
  const TensorInfo* info = find(name);
  if (info == nullptr) return Error(impl_->path + ": no tensor " + io::quote_name(name)).classified(ErrorCode::NotFound);
  return view(*info);
}

}  // namespace nmkit
