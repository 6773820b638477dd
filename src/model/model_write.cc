#include "nmkit/model_write.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "nmkit/gguf.h"

#include "model/family.h"

namespace nmkit {

Status write_model_gguf(const std::string& path, const LlamaModel& model, const ModelSource& source, DType dtype) {
  uint32_t file_type = 0;
  switch (dtype) {
    case DType::F32: file_type = 0; break;  // llama.cpp LLAMA_FTYPE_ALL_F32
    case DType::F16: file_type = 1; break;  // LLAMA_FTYPE_MOSTLY_F16
    case DType::BF16: file_type = 32; break;  // LLAMA_FTYPE_MOSTLY_BF16
    default:
      return Error(path + ": GGUF output dtype " + std::string(dtype_name(dtype)) + " is not F32, F16 or BF16");
  }
  auto tensors = model.tensors();
  if (!tensors.ok()) return tensors.error().with_context(path + ": ");
  std::vector<GgufKeyValue> metadata;
  bool has_file_type = false;
  if (const GgufFile* gguf = source.gguf()) {
    for (const auto& kv : gguf->metadata()) {
      if (kv.key == "general.file_type") {
        metadata.push_back({kv.key, GgufValue::of_uint32(file_type)});
        has_file_type = true;
      } else {
        metadata.push_back(kv);
      }
    }
  } else {
    // The keys llama.cpp reads for the family (llama.cpp's converter writes them so), under its GGUF
    // architecture's prefix.
    const LlamaParams& p = model.params();
    const model::Family& family = model::family_of(p);
    const std::string k = std::string(family.gguf_arch) + ".";
    auto u32 = [](int64_t v) { return GgufValue::of_uint32(static_cast<uint32_t>(v)); };
    metadata = {{"general.architecture", GgufValue::of_string(family.gguf_arch)},
                {k + "vocab_size", u32(p.n_vocab)},
                {k + "context_length", u32(p.n_ctx_train)},
                {k + "embedding_length", u32(p.n_embd)},
                {k + "block_count", u32(p.n_layer)},
                {k + "feed_forward_length", u32(p.n_ff)},
                {k + "rope.dimension_count", u32(p.head_dim())},
                {k + "attention.head_count", u32(p.n_head)},
                {k + "attention.head_count_kv", u32(p.n_head_kv)},
                {k + "attention.key_length", u32(p.head_dim())},
                {k + "attention.value_length", u32(p.head_dim())},
                {k + "attention.layer_norm_rms_epsilon", GgufValue::of_float32(p.rms_eps)},
                {k + "rope.freq_base", GgufValue::of_float32(p.rope_base)}};
    if (p.rope_scale != 1.0f) {
      metadata.push_back({k + "rope.scaling.type", GgufValue::of_string("linear")});
      metadata.push_back({k + "rope.scaling.factor", GgufValue::of_float32(1.0f / p.rope_scale)});
    }
    if (family.write_gguf) family.write_gguf(p, metadata);
  }
  if (!has_file_type) metadata.push_back({"general.file_type", GgufValue::of_uint32(file_type)});
  // The source GGUF's tensor order (llama.cpp's converter orders tensors its own way; keep it).
  if (const GgufFile* gguf = source.gguf()) {
    std::map<std::string, size_t> order;
    for (const auto& info : gguf->tensors()) order.emplace(info.name, order.size());
    std::stable_sort(tensors->begin(), tensors->end(), [&order](const NamedTensor& a, const NamedTensor& b) {
      auto ia = order.find(a.name), ib = order.find(b.name);
      const size_t ka = ia == order.end() ? order.size() : ia->second;
      const size_t kb = ib == order.end() ? order.size() : ib->second;
      return ka < kb;
    });
  }
  std::vector<OutputTensor> out;
  for (auto& t : *tensors) {
    if (dtype == DType::F32 || t.tensor.shape().size() == 1) {
      out.push_back(OutputTensor::owning(t.name, std::move(t.tensor)));
      continue;
    }
    Tensor converted = Tensor::empty(dtype, t.tensor.shape());
    convert_from_f32(dtype, t.tensor.as<float>(), converted.data(), static_cast<size_t>(t.tensor.numel()));
    out.push_back(OutputTensor::owning(t.name, std::move(converted)));
  }
  return write_gguf(path, metadata, out);
}

}  // namespace nmkit
