// Building a LlamaModel: loading and checking every tensor, pruning on load (docs/design.md 11.5) and
// packing the linears into SparseLinears; replacing a linear later (calibrated pruning); the tensors
// for saving.
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "model/llama_impl.h"
#include "nmkit/format.h"
#include "nmkit/slide.h"
#include "nmkit/slide_geometry.h"

namespace nmkit {

using model::kGroups;
using model::kLinearGroup;

Status LlamaParams::validate() const {
  auto bad = [](const char* what, int64_t v) {
    return Error("llama: " + std::string(what) + " = " + std::to_string(v) + " is not supported");
  };
  if (n_vocab < 1) return bad("n_vocab", n_vocab);
  if (n_embd < 1) return bad("n_embd", n_embd);
  if (n_layer < 1) return bad("n_layer", n_layer);
  if (n_head < 1 || n_embd % n_head != 0) return bad("n_head (must divide n_embd)", n_head);
  if (head_dim() % 2 != 0) return bad("head size (must be even for rope)", head_dim());
  if (n_head_kv < 1 || n_head % n_head_kv != 0) return bad("n_head_kv (must divide n_head)", n_head_kv);
  if (n_ff < 1) return bad("n_ff", n_ff);
  if (n_ctx_train < 1) return bad("n_ctx_train", n_ctx_train);
  if (!(rms_eps > 0.0f)) return Error("llama: rms_eps = " + std::to_string(rms_eps) + " is not positive");
  if (!(rope_base > 0.0f)) return Error("llama: rope_base = " + std::to_string(rope_base) + " is not positive");
  return ok_status();
}

Result<LinearFormat> parse_linear_format(std::string_view text) {
  if (text == "dense") return LinearFormat::Dense;
  if (text == "sparse24") return LinearFormat::Sparse24;
  if (text == "nm") return LinearFormat::NM;
  if (text == "slid") return LinearFormat::Slid;
  return Error("format '" + std::string(text) + "' is not dense, sparse24, nm or slid");
}

std::string_view linear_format_name(LinearFormat format) {
  switch (format) {
    case LinearFormat::Dense: return "dense";
    case LinearFormat::Sparse24: return "sparse24";
    case LinearFormat::NM: return "nm";
    case LinearFormat::Slid: return "slid";
  }
  return "?";
}

Result<DType> parse_weight_dtype(std::string_view text) {
  if (text == "f32") return DType::F32;
  if (text == "bf16") return DType::BF16;
  if (text == "int8") return DType::I8;
  return Error("weights '" + std::string(text) + "' is not f32, bf16 or int8");
}

const std::vector<std::string>& LlamaModel::block_linear_names() {
  static const std::vector<std::string> names = {"attn_q", "attn_k", "attn_v", "attn_output",
                                                 "ffn_gate", "ffn_up", "ffn_down"};
  return names;
}

namespace model {

std::string block_tensor_name(int64_t b, std::string_view name) {
  return "blk." + std::to_string(b) + "." + std::string(name) + ".weight";
}

Status check_format(DType weights, LinearFormat format, const std::optional<Pattern>& pattern) {
  if (weights != DType::F32 && weights != DType::BF16 && weights != DType::I8) {
    return Error("model: weights " + std::string(dtype_name(weights)) + " is not f32, bf16 or int8");
  }
  if (format == LinearFormat::Dense) return ok_status();
  if (!pattern) return Error("model: format " + std::string(linear_format_name(format)) + " needs a pattern");
  if (format == LinearFormat::Sparse24 && !(*pattern == Pattern{2, 4})) {
    return Error("model: format sparse24 needs pattern 2:4, not " + pattern->str());
  }
  if (format == LinearFormat::NM && pattern->group > 16) {
    return Error("model: format nm supports groups up to 16, not " + pattern->str());
  }
  if (format == LinearFormat::Slid && !pattern->slidable()) {
    return Error("model: format slid needs a pattern keep:2N with keep <= 2N-2, not " + pattern->str());
  }
  return ok_status();
}

// Packs a dense(-masked) f32 weight [rows, K] as `format` in the `weights` dtype.
Result<SparseLinear> pack_linear(const Tensor& w, DType weights, LinearFormat format,
                                 const std::optional<Pattern>& pattern, const std::string& name) {
  NMKIT_TRY(check_format(weights, format, pattern));
  LinearOptions lo;
  lo.int8 = weights == DType::I8;
  // bf16 weights take bf16 activations (each linear's input rounded to nearest even, as llama.cpp's
  // BF16 type does): oneDNN then runs its AVX512-BF16 GEMM (bf16 x bf16 -> f32) instead of an f32 GEMM
  // on a widened copy, and the small-M kernels use vdpbf16ps. bench linear, SmolLM2 1536x576, M=512, 1
  // thread (loaded machine): 2:4 bf16 on oneDNN 17.1 ms with f32 activations, 11.1 ms with bf16 ones.
  lo.bf16_activations = weights == DType::BF16 && format != LinearFormat::Slid;
  Tensor bf16;
  TensorView view = w.view();
  if (weights == DType::BF16 && format != LinearFormat::Slid) {
    bf16 = Tensor::empty(DType::BF16, w.shape());
    convert_from_f32(DType::BF16, w.as<float>(), bf16.data(), static_cast<size_t>(w.numel()));
    view = bf16.view();
  }
  Result<SparseLinear> linear = Error("");
  switch (format) {
    case LinearFormat::Dense:
      linear = SparseLinear::dense(view, lo);
      break;
    case LinearFormat::Sparse24: {
      auto packed = compress_sparse24(view, name);
      if (!packed.ok()) return packed.error();
      linear = SparseLinear::sparse24(*packed, lo);
      break;
    }
    case LinearFormat::NM: {
      auto packed = compress_nm(view, *pattern, name);
      if (!packed.ok()) return packed.error();
      linear = SparseLinear::nm(*packed, lo);
      break;
    }
    case LinearFormat::Slid: {
      auto slid = slide(view, *pattern, 32, name);
      if (!slid.ok()) return slid.error();
      lo.int8 = true;
      linear = SparseLinear::slid(slid->weight.view(), slid->geometry, lo);
      break;
    }
  }
  if (!linear.ok()) return linear.error().with_context(name + ": ");
  return std::move(linear.value());
}

namespace {

// Rows of `parts` stacked into one [sum rows, K] tensor (the linears that share an input run as one
// SparseLinear: fewer calls and thread hand-offs per token; N:M groups run along K, so stacking rows
// changes no group).
Tensor stack_rows(const std::vector<const Tensor*>& parts) {
  if (parts.size() == 1) return Tensor::copy_of(parts[0]->view());
  int64_t rows = 0;
  for (const Tensor* p : parts) rows += p->rows();
  Tensor out = Tensor::empty(DType::F32, {rows, parts[0]->cols()});
  std::byte* dst = out.data();
  for (const Tensor* p : parts) {
    std::memcpy(dst, p->data(), p->nbytes());
    dst += p->nbytes();
  }
  return out;
}

Result<Tensor> load_checked(const TensorLoader& load, const std::string& name, const Shape& shape) {
  auto t = load(name);
  if (!t.ok()) return t.error();
  if (t->dtype() != DType::F32) {
    return Error(name + ": loader gave dtype " + std::string(dtype_name(t->dtype())) + ", expected F32");
  }
  if (t->shape() != shape) {
    return Error(name + ": shape " + shape_str(t->shape()) + " does not match the model's " + shape_str(shape));
  }
  const float* v = t->as<float>();
  const int64_t numel = t->numel();
  for (int64_t i = 0; i < numel; ++i) {
    if (!std::isfinite(v[i])) {
      return Error(name + ": element " + std::to_string(i) + " is " + std::to_string(v[i]));
    }
  }
  return t;
}

}  // namespace

Status Block::pack_group(int g, const LlamaParams& p, const ModelOptions& o, int64_t b,
                         std::vector<Tensor>& weights, LinearFormat format,
                         const std::optional<Pattern>& pattern) {
  (void)p;
  std::vector<const Tensor*> parts;
  for (int i = 0; i < 7; ++i) {
    if (kLinearGroup[i] == g) parts.push_back(&weights[static_cast<size_t>(i)]);
  }
  const Tensor stacked = stack_rows(parts);
  const std::string name = block_tensor_name(b, kGroups[g].label);
  auto linear = pack_linear(stacked, o.weights, format, pattern, name);
  if (!linear.ok()) return linear.error();
  linears[static_cast<size_t>(g)] = std::make_unique<SparseLinear>(std::move(linear.value()));
  formats[static_cast<size_t>(g)] = format;
  patterns[static_cast<size_t>(g)] = pattern;
  return ok_status();
}

}  // namespace model

LlamaModel::LlamaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlamaModel::LlamaModel(LlamaModel&&) noexcept = default;
LlamaModel& LlamaModel::operator=(LlamaModel&&) noexcept = default;
LlamaModel::~LlamaModel() = default;

const LlamaParams& LlamaModel::params() const { return impl_->params; }
const ModelOptions& LlamaModel::options() const { return impl_->options; }

Result<LlamaModel> LlamaModel::build(const LlamaParams& params, const TensorLoader& load,
                                     const ModelOptions& options) {
  NMKIT_TRY(params.validate());
  NMKIT_TRY(model::check_format(options.weights, options.format, options.pattern));  // before any loading
  if (options.format != LinearFormat::Dense || options.pattern) {
    if (options.format != LinearFormat::Dense && !options.pattern) {
      return Error("model: format " + std::string(linear_format_name(options.format)) + " needs --pattern");
    }
  }
  if (options.pattern && options.method != PruneMethod::Magnitude) {
    return Error("model: pruning on load supports the magnitude method only (calibrated methods prune "
                 "through the model, docs/design.md 12)");
  }
  auto impl = std::make_unique<Impl>();
  impl->params = params;
  impl->options = options;
  const int64_t d = params.n_embd, hd = params.head_dim();
  auto embd = model::load_checked(load, "token_embd.weight", {params.n_vocab, d});
  if (!embd.ok()) return embd.error();
  impl->token_embd = std::move(embd.value());
  auto out_norm = model::load_checked(load, "output_norm.weight", {d});
  if (!out_norm.ok()) return out_norm.error();
  impl->output_norm = std::move(out_norm.value());

  const Shape shapes[7] = {{params.n_head * hd, d},  {params.n_head_kv * hd, d}, {params.n_head_kv * hd, d},
                           {d, params.n_head * hd},  {params.n_ff, d},           {params.n_ff, d},
                           {d, params.n_ff}};
  impl->blocks.resize(static_cast<size_t>(params.n_layer));
  for (int64_t b = 0; b < params.n_layer; ++b) {
    model::Block& block = impl->blocks[static_cast<size_t>(b)];
    auto an = model::load_checked(load, model::block_tensor_name(b, "attn_norm"), {d});
    if (!an.ok()) return an.error();
    block.attn_norm = std::move(an.value());
    auto fn = model::load_checked(load, model::block_tensor_name(b, "ffn_norm"), {d});
    if (!fn.ok()) return fn.error();
    block.ffn_norm = std::move(fn.value());
    std::vector<Tensor> weights(7);
    for (size_t i = 0; i < 7; ++i) {
      const std::string name = model::block_tensor_name(b, block_linear_names()[i]);
      auto w = model::load_checked(load, name, shapes[i]);
      if (!w.ok()) return w.error();
      if (options.pattern) {
        auto pruned = prune(w->view(), *options.pattern, options.method, {}, name);
        if (!pruned.ok()) return pruned.error();
        weights[i] = std::move(pruned->pruned);
      } else {
        weights[i] = std::move(w.value());
      }
    }
    for (int g = 0; g < model::kGroupCount; ++g) {
      NMKIT_TRY(block.pack_group(g, params, options, b, weights, options.format, options.pattern));
    }
    if (options.keep_dense_weights) block.dense = std::move(weights);
    if (options.on_block) options.on_block(b, params.n_layer);
  }

  // The head stays dense (docs/design.md 11.5), in the model's weight dtype.
  Tensor output;
  if (params.tied_output) {
    output = Tensor::copy_of(impl->token_embd.view());
  } else {
    auto w = model::load_checked(load, "output.weight", {params.n_vocab, d});
    if (!w.ok()) return w.error();
    output = std::move(w.value());
  }
  auto head = model::pack_linear(output, options.weights, LinearFormat::Dense, std::nullopt,
                                 params.tied_output ? "token_embd.weight" : "output.weight");
  if (!head.ok()) return head.error();
  impl->head = std::make_unique<SparseLinear>(std::move(head.value()));
  if (!params.tied_output && options.keep_dense_weights) impl->output = std::move(output);
  return LlamaModel(std::move(impl));
}

Result<TensorView> LlamaModel::dense_weight(int64_t b, std::string_view name) const {
  NMKIT_TRY(impl_->check_linear(b, name));
  const model::Block& block = impl_->blocks[static_cast<size_t>(b)];
  if (block.dense.empty()) return Error("model: dense weights were not kept (ModelOptions::keep_dense_weights)");
  return block.dense[static_cast<size_t>(model::linear_index(name))].view();
}

Status LlamaModel::replace_linear(int64_t b, std::string_view name, const TensorView& weight,
                                  LinearFormat format, std::optional<Pattern> pattern) {
  NMKIT_TRY(impl_->check_linear(b, name));
  model::Block& block = impl_->blocks[static_cast<size_t>(b)];
  if (block.dense.empty()) return Error("model: replace_linear needs ModelOptions::keep_dense_weights");
  const int i = model::linear_index(name);
  Tensor& current = block.dense[static_cast<size_t>(i)];
  const std::string tensor_name = model::block_tensor_name(b, name);
  if (weight.dtype != DType::F32 || weight.shape != current.shape()) {
    return Error(tensor_name + ": replacement " + std::string(dtype_name(weight.dtype)) + " " +
                 shape_str(weight.shape) + " does not match F32 " + shape_str(current.shape()));
  }
  const int g = model::kLinearGroup[i];
  // Linears packed together share one format: the group is rebuilt from every member's weight.
  Tensor previous = std::move(current);
  current = Tensor::copy_of(weight);
  Status status = block.pack_group(g, impl_->params, impl_->options, b, block.dense, format, pattern);
  if (!status.ok()) current = std::move(previous);
  return status;
}

Result<std::vector<NamedTensor>> LlamaModel::tensors() const {
  const Impl& m = *impl_;
  if (!m.options.keep_dense_weights) return Error("model: tensors() needs ModelOptions::keep_dense_weights");
  std::vector<NamedTensor> out;
  out.push_back({"token_embd.weight", Tensor::copy_of(m.token_embd.view())});
  out.push_back({"output_norm.weight", Tensor::copy_of(m.output_norm.view())});
  if (!m.params.tied_output) out.push_back({"output.weight", Tensor::copy_of(m.output.view())});
  for (int64_t b = 0; b < m.params.n_layer; ++b) {
    const model::Block& block = m.blocks[static_cast<size_t>(b)];
    const auto& names = block_linear_names();
    out.push_back({model::block_tensor_name(b, "attn_norm"), Tensor::copy_of(block.attn_norm.view())});
    for (size_t i = 0; i < 4; ++i) out.push_back({model::block_tensor_name(b, names[i]), Tensor::copy_of(block.dense[i].view())});
    out.push_back({model::block_tensor_name(b, "ffn_norm"), Tensor::copy_of(block.ffn_norm.view())});
    for (size_t i = 4; i < 7; ++i) out.push_back({model::block_tensor_name(b, names[i]), Tensor::copy_of(block.dense[i].view())});
  }
  return out;
}

size_t LlamaModel::weight_bytes_per_token() const {
  size_t bytes = impl_->head->bytes_streamed();
  for (const auto& block : impl_->blocks) {
    for (const auto& l : block.linears) bytes += l->bytes_streamed();
  }
  return bytes;
}

namespace model {
namespace {

size_t linear_storage_bytes(int64_t rows, int64_t K, DType weights, LinearFormat format,
                            const std::optional<Pattern>& pattern) {
  const double ds = weights == DType::F32 ? 4 : weights == DType::BF16 ? 2 : 1;
  const double scales = weights == DType::I8 ? 4.0 * static_cast<double>(rows) : 0.0;
  const double r = static_cast<double>(rows);
  double bytes = 0;
  switch (format) {
    case LinearFormat::Dense:
      bytes = r * static_cast<double>(K) * ds;
      break;
    case LinearFormat::Sparse24: {
      const int64_t K_pad = (K + 3) / 4 * 4;
      bytes = r * (static_cast<double>(K_pad / 2) * ds + static_cast<double>((K_pad + 7) / 8));
      break;
    }
    case LinearFormat::NM: {
      const int64_t groups = pattern->groups(K);
      bytes = r * (static_cast<double>(groups * pattern->keep) * ds + static_cast<double>((pattern->padded(K) + 7) / 8));
      break;
    }
    case LinearFormat::Slid: {
      auto g = SlideGeometry::make(*pattern, K);
      const int64_t Kp = g.ok() ? g->K_prime() : K;
      bytes = r * (static_cast<double>(Kp / 2) + static_cast<double>(Kp / 8));  // int8 values + 2-bit indices
      break;
    }
  }
  return static_cast<size_t>(bytes + scales);
}

}  // namespace
}  // namespace model

size_t LlamaModel::storage_bytes() const {
  const LlamaParams& p = impl_->params;
  const DType w = impl_->options.weights;
  const int64_t d = p.n_embd, hd = p.head_dim();
  size_t bytes = model::linear_storage_bytes(p.n_vocab, d, w, LinearFormat::Dense, std::nullopt);
  if (!p.tied_output) bytes *= 2;
  bytes += static_cast<size_t>(d) * 4 * static_cast<size_t>(1 + 2 * p.n_layer);  // norms
  const int64_t shapes[7][2] = {{p.n_head * hd, d}, {p.n_head_kv * hd, d}, {p.n_head_kv * hd, d}, {d, p.n_head * hd},
                                {p.n_ff, d},        {p.n_ff, d},           {d, p.n_ff}};
  for (const auto& block : impl_->blocks) {
    for (int i = 0; i < 7; ++i) {
      const int g = model::kLinearGroup[i];
      bytes += model::linear_storage_bytes(shapes[i][0], shapes[i][1], w, block.formats[static_cast<size_t>(g)],
                                           block.patterns[static_cast<size_t>(g)]);
    }
  }
  return bytes;
}

std::string LlamaModel::linear_kernel_name(int64_t M) const {
  return impl_->blocks[0].linears[model::kGroupGateUp]->kernel_name(M);
}

std::string LlamaModel::head_kernel_name(int64_t M) const { return impl_->head->kernel_name(M); }

}  // namespace nmkit
