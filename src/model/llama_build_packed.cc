// A model from a packed model file (docs/design.md 11.9): its linears run in place from their
// records in the file's mapping, so building one converts nothing; and the layers such a file
// stores.
#include <string>
#include <utility>
#include <vector>

#include "linear/linear_records.h"
#include "model/llama_impl.h"

namespace nmkit {

namespace model {

Result<SparseLinear> packed_layer(const ModelTensors& src, const std::string& prefix, const LinearOptions& options) {
  const auto name = [&](std::string_view part) { return prefix + ".nmkit." + std::string(part); };
  const auto header = src.stored(name("form"));
  if (!header) return Error("packed model: tensor '" + name("form") + "' is missing");
  if (header->type != GgmlType::I32 || header->shape.size() != 1) {
    return Error("packed model: tensor '" + name("form") + "' is " + std::string(ggml_type_name(header->type)) + " " +
                 shape_str(header->shape) + ", not a 1-D I32 record header");
  }
  linear::StoredRecords records;
  records.header = {reinterpret_cast<const int32_t*>(header->data), static_cast<size_t>(header->shape[0])};
  for (int a = 0; a < linear::kRecordArrays; ++a) {
    const auto array = src.stored(name(linear::record_array_name(a)));
    if (!array) continue;  // absent: the layout says whether it should be there
    if (array->type != GgmlType::I8 || array->shape.size() != 1) {
      return Error("packed model: tensor '" + name(linear::record_array_name(a)) + "' is " +
                   std::string(ggml_type_name(array->type)) + " " + shape_str(array->shape) + ", not 1-D I8 bytes");
    }
    records.arrays[a] = {array->data, static_cast<size_t>(array->shape[0])};
  }
  return linear::layer_from_records(records, header->owner, options, "packed model: " + prefix);
}

std::string packed_group_prefix(int64_t b, int g) { return "blk." + std::to_string(b) + "." + kGroups[g].label; }

}  // namespace model

Result<ModelOptions> model_options_for(const ModelTensors& tensors, const ModelOptions& asked) {
  if (!tensors.packed) return asked;
  ModelOptions file = asked;  // what was asked, in the file's form
  file.weights = tensors.packed->weights;
  file.format = tensors.packed->format;
  file.pattern = tensors.packed->pattern;
  const bool default_form = asked.weights == DType::F32 && asked.format == LinearFormat::Dense && !asked.pattern;
  const bool same_form = asked.weights == file.weights && asked.format == file.format && asked.pattern == file.pattern;
  if (!default_form && !same_form) {  // nothing asked takes the file's form; another form is refused
    return Error(ErrorCode::InvalidArgument, "model: a packed model file runs as the form it was packed in, " +
                                                 weight_form_name(file) + ", not " + weight_form_name(asked) +
                                                 " (pack the source model in that form)");
  }
  if (asked.keep_dense_weights) {
    return Error(ErrorCode::InvalidArgument, "model: a packed model file holds no dense weights to keep (calibrate "
                                             "and write models from the source model)");
  }
  return file;
}

std::vector<std::pair<std::string, const SparseLinear*>> LlamaModel::packed_layers() const {
  std::vector<std::pair<std::string, const SparseLinear*>> out;
  for (size_t b = 0; b < impl_->blocks.size(); ++b) {
    for (int g = 0; g < model::kGroupCount; ++g) {
      out.emplace_back(model::packed_group_prefix(static_cast<int64_t>(b), g), impl_->blocks[b].linears[static_cast<size_t>(g)].get());
    }
  }
  if (!impl_->head_reads_embedding) out.emplace_back("output", impl_->head.get());
  return out;
}

bool LlamaModel::head_reads_embedding() const { return impl_->head_reads_embedding; }

}  // namespace nmkit
