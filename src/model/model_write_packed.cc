// A packed model file (nmkit/model_write.h write_packed_model; docs/design.md 11.9): the model's
// linears written as the records they run from, everything else as the source stores it.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "linear/linear_records.h"
#include "model/model_source_impl.h"  // expected_tensors
#include "nmkit/model_write.h"

namespace nmkit {
namespace {

// The records of one layer as tensors: the header (I32), then each array it has (I8 bytes).
Status add_layer(const std::string& prefix, const SparseLinear& layer, std::vector<GgufOutputTensor>& out) {
  auto records = linear::records_of(layer);
  if (!records.ok()) return records.error().with_context(prefix + ": ");
  GgufOutputTensor header;
  header.name = prefix + ".nmkit.form";
  header.type = GgmlType::I32;
  header.shape = {static_cast<int64_t>(records->header.size())};
  header.fill = [fields = records->header](std::byte* dst) {
    std::memcpy(dst, fields.data(), fields.size() * sizeof(int32_t));
    return ok_status();
  };
  out.push_back(std::move(header));
  for (int a = 0; a < linear::kRecordArrays; ++a) {
    const linear::StoredArray& array = records->arrays[a];
    if (array.bytes == 0) continue;
    GgufOutputTensor t;
    t.name = prefix + ".nmkit." + std::string(linear::record_array_name(a));
    t.type = GgmlType::I8;
    t.shape = {static_cast<int64_t>(array.bytes)};
    t.fill = [write = array.write](std::byte* dst) {
      write(dst);
      return ok_status();
    };
    out.push_back(std::move(t));
  }
  return ok_status();
}

// A tensor the model reads as the source holds it: its stored bytes where they are in GGUF row
// order, else its f32 values (a Hugging Face norm with its offset, say).
GgufOutputTensor source_tensor(const ModelSource& source, const std::string& name, const Shape& shape) {
  GgufOutputTensor t;
  t.name = name;
  t.shape = shape;
  if (const auto stored = source.stored(name)) {
    t.type = stored->type;
    t.fill = [stored = *stored](std::byte* dst) {
      std::memcpy(dst, stored.data, stored.row_bytes * static_cast<size_t>(shape_numel(stored.shape) / stored.shape.back()));
      return ok_status();
    };
    return t;
  }
  t.type = GgmlType::F32;
  t.fill = [&source, name](std::byte* dst) -> Status {
    auto values = source.load_f32(name);
    if (!values.ok()) return values.error();
    std::memcpy(dst, values->data(), values->nbytes());
    return ok_status();
  };
  return t;
}

}  // namespace

Status write_packed_model(const std::string& path, const LlamaModel& model, const ModelSource& source,
                          const ModelWriteOptions& options) {
  const LlamaParams& params = model.params();
  const ModelOptions& form = model.options();
  auto source_metadata = model_gguf_metadata(params, source);
  if (!source_metadata.ok()) return source_metadata.error().with_context(path + ": ");
  std::vector<GgufKeyValue> metadata;
  for (GgufKeyValue& kv : *source_metadata) {  // a packed source's own nmkit keys are replaced
    if (kv.key.rfind("nmkit.packed.", 0) != 0) metadata.push_back(std::move(kv));
  }
  metadata.push_back({"nmkit.packed.version", GgufValue::of_uint32(1)});
  metadata.push_back({"nmkit.packed.weights", GgufValue::of_string(form.weights == DType::I8 ? "int8"
                                                                   : form.weights == DType::BF16 ? "bf16" : "f32")});
  metadata.push_back({"nmkit.packed.format", GgufValue::of_string(std::string(linear_format_name(form.format)))});
  if (form.pattern) metadata.push_back({"nmkit.packed.pattern", GgufValue::of_string(form.pattern->str())});
  metadata.push_back({"nmkit.packed.head", GgufValue::of_string(model.head_reads_embedding() ? "embedding" : "records")});
  metadata.push_back({"nmkit.packed.tied_output", GgufValue::of_bool(params.tied_output)});

  std::vector<GgufOutputTensor> tensors;
  for (const auto& [name, shape] : model_source::expected_tensors(params)) {
    if (shape.size() == 2 && name != "token_embd.weight") continue;  // linears and a separate head: records
    tensors.push_back(source_tensor(source, name, shape));
  }
  if (auto freqs = rope_factors_tensor(params)) {
    auto t = GgufOutputTensor::from(*freqs);
    if (!t.ok()) return t.error();
    tensors.push_back(std::move(*t));
  }
  for (const auto& [prefix, layer] : model.packed_layers()) NMKIT_TRY(add_layer(prefix, *layer, tensors));
  GgufWriteOptions write_options;
  write_options.alignment = 64;  // the kernels' vector loads: every array starts on 64 bytes
  write_options.on_tensor = options.on_tensor;
  return write_gguf(path, metadata, tensors, write_options);
}

Status check_packed_model_output(const std::string& path, DType weights, const ModelSource& source,
                                 const std::string& label) {
  auto output = parse_model_output(path, weights == DType::F32 ? DType::F32 : DType::BF16, source, label);
  if (!output.ok()) return output.error();
  if (output->kind != ModelOutput::Kind::Gguf) return Error(label + ": a packed model is one .gguf file, not '" + path + "'");
  return check_model_output(*output, source);
}

}  // namespace nmkit
