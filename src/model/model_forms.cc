// The weight forms a model runs (include/nmkit/model.h): one linear packed as the model packs its
// block linears, for callers outside it, and the name of a form.
#include "model/llama_impl.h"

namespace nmkit {

Result<SparseLinear> pack_linear(const TensorView& w, DType weights, LinearFormat format,
                                 const std::optional<Pattern>& pattern, std::string_view name) {
  if (w.shape.size() != 2 || (w.dtype != DType::F32 && w.dtype != DType::F16 && w.dtype != DType::BF16)) {
    return Error(ErrorCode::InvalidArgument, "expected a 2-D f32, f16 or bf16 weight, got " +
                                                 std::string(dtype_name(w.dtype)) + " " + shape_str(w.shape))
        .with_tensor(std::string(name));
  }
  return model::pack_linear(w, weights, format, pattern, std::string(name));
}

std::string weight_form_name(const ModelOptions& options) {
  std::string name = options.weights == DType::F32 ? "f32" : options.weights == DType::BF16 ? "bf16" : "int8";
  if (options.pattern) {
    name += ' ';
    name += options.pattern->str();
  }
  name += ' ';
  name += linear_format_name(options.format);
  return name;
}

}  // namespace nmkit
