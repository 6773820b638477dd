// Reading a model's tensors from its source (docs/design.md 11.7): the f32 loader's tensors checked,
// the embedding and the block linears in the file's dtype where it stores them so, and what a
// tensor's source pages are given back by.
#include <memory>
#include <optional>
#include <string>

#include "model/llama_impl.h"

namespace nmkit::model {

Result<Tensor> load_checked(const TensorLoader& load, const std::string& name, const Shape& shape) {
  auto t = load(name);
  if (!t.ok()) return t.error();
  if (t->dtype() != DType::F32) {
    return Error(name + ": loader gave dtype " + std::string(dtype_name(t->dtype())) + ", expected F32");
  }
  if (t->shape() != shape) {
    return Error(name + ": shape " + shape_str(t->shape()) + " does not match the model's " + shape_str(shape));
  }
  NMKIT_TRY(check_finite(t->view(), name));
  return t;
}

Result<Embedding> load_embedding(const ModelTensors& src, const LlamaParams& p) {
  const std::string name = "token_embd.weight";
  const Shape shape{p.n_vocab, p.n_embd};
  if (src.stored) {
    if (auto stored = src.stored(name)) {
      if (stored->shape != shape) {
        return Error(name + ": shape " + shape_str(stored->shape) + " does not match the model's " + shape_str(shape));
      }
      return Embedding::over(std::move(*stored), name);
    }
  }
  auto t = load_checked(src.load_f32, name, shape);
  if (!t.ok()) return t.error();
  return Embedding::of(std::move(*t));
}

void release(const ModelTensors& src, const std::string& name) {
  if (src.release) src.release(name);
}

std::optional<DType> float_dtype(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return DType::F32;
    case GgmlType::F16: return DType::F16;
    case GgmlType::BF16: return DType::BF16;
    default: return std::nullopt;
  }
}

Result<Weight> load_weight(const ModelTensors& src, const std::string& name, const Shape& shape, bool finite) {
  if (src.stored) {
    if (auto stored = src.stored(name)) {
      if (auto dtype = float_dtype(stored->type)) {
        if (stored->shape != shape) {
          return Error(name + ": shape " + shape_str(stored->shape) + " does not match the model's " + shape_str(shape));
        }
        const TensorView view{*dtype, shape, stored->data};
        if (finite) NMKIT_TRY(check_finite(view, name));
        return Weight{Tensor(), view, stored->owner};
      }
    }
  }
  auto t = load_checked(src.load_f32, name, shape);
  if (!t.ok()) return t.error();
  Weight w{std::move(*t), {}, nullptr};
  w.view = w.owned.view();
  return w;
}

Tensor f32_copy(Weight& w) {
  if (w.view.dtype != DType::F32) return convert_rows(w.view, DType::F32);
  if (w.owned.numel() > 0 && w.owned.data() == w.view.data) return std::move(w.owned);
  return Tensor::copy_of(w.view);
}

}  // namespace nmkit::model
