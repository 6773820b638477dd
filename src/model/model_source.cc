// ModelSource: opens a GGUF file or a Hugging Face folder (model_source_gguf.cc,
// model_source_hf.cc) and serves its tensors under GGUF names as f32.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "io/mapped_file.h"
#include "model/family.h"
#include "model/model_source_impl.h"

namespace nmkit {
namespace model_source {

std::vector<std::pair<std::string, Shape>> expected_tensors(const LlamaParams& p) {
  std::vector<std::pair<std::string, Shape>> out;
  for (model::ModelTensorName& t : model::model_tensor_names(p)) out.emplace_back(std::move(t.gguf), std::move(t.shape));
  return out;
}

std::string unsupported_architecture(const std::string& arch) {
  std::string list;
  for (const std::string& a : ModelSource::supported_architectures()) list += (list.empty() ? "" : ", ") + a;
  return "architecture '" + arch + "' is not supported (supported: " + list + ")";
}

}  // namespace model_source

ModelSource::ModelSource(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
ModelSource::ModelSource(ModelSource&&) noexcept = default;
ModelSource& ModelSource::operator=(ModelSource&&) noexcept = default;
ModelSource::~ModelSource() = default;

const std::vector<std::string>& ModelSource::supported_architectures() {
  static const std::vector<std::string> archs = model::gguf_architectures();
  return archs;
}

Result<ModelSource> ModelSource::open(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    return Error(err == ENOENT ? ErrorCode::NotFound : ErrorCode::Io, std::string("cannot open: ") + std::strerror(err))
        .with_file(path);
  }
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  if (S_ISDIR(st.st_mode)) {
    impl->kind = Kind::HuggingFace;
    if (Status opened = model_source::open_hf(*impl); !opened.ok()) return opened.error().classified(ErrorCode::InvalidFile);
  } else {
    char magic[4] = {};
    std::ifstream in(path, std::ios::binary);
    in.read(magic, 4);
    if (in.gcount() != 4 || std::memcmp(magic, "GGUF", 4) != 0) {
      return Error(path + ": not a GGUF file or a Hugging Face model folder (config.json + *.safetensors)")
          .classified(ErrorCode::InvalidFile);
    }
    impl->kind = Kind::Gguf;
    if (Status opened = model_source::open_gguf(*impl); !opened.ok()) return opened.error().classified(ErrorCode::InvalidFile);
  }
  return ModelSource(std::shared_ptr<const Impl>(std::move(impl)));
}

ModelSource::Kind ModelSource::kind() const { return impl_->kind; }
const std::string& ModelSource::path() const { return impl_->path; }
const std::string& ModelSource::architecture() const { return impl_->architecture; }
const LlamaParams& ModelSource::params() const { return impl_->params; }
const std::vector<std::string>& ModelSource::tensor_names() const { return impl_->names; }
const std::vector<std::string>& ModelSource::input_files() const { return impl_->files; }

bool ModelSource::has_tensor(std::string_view name) const {
  return std::find(impl_->names.begin(), impl_->names.end(), name) != impl_->names.end();
}

Result<Tensor> ModelSource::load_f32(std::string_view name) const {
  if (!has_tensor(name)) {
    if (impl_->packed) {  // design.md 11.9: its linears are records only
      return Error(impl_->path + ": a packed model file holds no weight '" + std::string(name) +
                   "' (its linears are packed records): convert, prune and calibrate the model it was packed from");
    }
    return Error(impl_->path + ": no tensor '" + std::string(name) + "' in this model");
  }
  if (impl_->gguf) return impl_->gguf->dequantize(name);
  const auto it = impl_->hf.find(std::string(name));
  NMKIT_ASSERT(it != impl_->hf.end());
  return model_source::load_hf(*impl_, it->second, name);
}

TensorLoader ModelSource::loader() const {
  return [this](const std::string& name) { return load_f32(name); };
}

namespace {

std::optional<GgmlType> ggml_type_of(DType dtype) {
  switch (dtype) {
    case DType::F32: return GgmlType::F32;
    case DType::F16: return GgmlType::F16;
    case DType::BF16: return GgmlType::BF16;
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<MappedTensor> ModelSource::stored(std::string_view name) const {
  if (!has_tensor(name)) return std::nullopt;
  MappedTensor t;
  t.owner = impl_;
  if (impl_->gguf) {
    const GgufTensorInfo* info = impl_->gguf->find(name);
    NMKIT_ASSERT(info != nullptr);
    t.type = info->type;
    t.shape = info->shape();
    t.data = impl_->gguf->raw(*info).data();
    t.row_bytes = static_cast<size_t>(info->ne[0] / ggml_block_elements(info->type) * ggml_block_bytes(info->type));
    return t;
  }
  const auto it = impl_->hf.find(std::string(name));
  NMKIT_ASSERT(it != impl_->hf.end());
  if (it->second.permute_heads != 0 || it->second.plus_one) return std::nullopt;
  const SafetensorsFile& shard = impl_->shards[it->second.shard];
  const TensorView view = shard.view(*shard.find(it->second.hf_name));
  const auto type = ggml_type_of(view.dtype);
  if (!type) return std::nullopt;
  t.type = *type;
  t.shape = view.shape;
  t.data = view.data;
  t.row_bytes = dtype_size(view.dtype) * static_cast<size_t>(view.shape.back());
  return t;
}

void ModelSource::release(std::string_view name) const {
  if (!has_tensor(name)) return;
  if (impl_->gguf) {
    const auto bytes = impl_->gguf->raw(*impl_->gguf->find(name));
    io::release_pages(bytes.data(), bytes.size());
    return;
  }
  const auto it = impl_->hf.find(std::string(name));
  const SafetensorsFile& shard = impl_->shards[it->second.shard];
  const TensorView view = shard.view(*shard.find(it->second.hf_name));
  io::release_pages(view.data, view.nbytes());
}

ModelTensors ModelSource::tensors() const {
  // Each function holds the source (its files and mappings) by shared pointer: the model may outlive
  // this object.
  auto self = std::make_shared<const ModelSource>(ModelSource(impl_));
  ModelTensors t;
  t.load_f32 = [self](const std::string& name) { return self->load_f32(name); };
  t.stored = [self](const std::string& name) { return self->stored(name); };
  t.release = [self](const std::string& name) { self->release(name); };
  t.packed = impl_->packed;
  return t;
}

const GgufFile* ModelSource::gguf() const { return impl_->gguf ? &*impl_->gguf : nullptr; }
const std::string& ModelSource::tokenizer_json() const { return impl_->tokenizer_json; }

}  // namespace nmkit
