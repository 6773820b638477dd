// Building a LlamaModel: loading and checking every tensor, pruning on load (docs/design.md 11.5) and
// packing the linears into SparseLinears; replacing a linear later (calibrated pruning); the tensors
// for saving.
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/page_bytes.h"
#include "core/system_memory.h"
#include "model/family.h"
#include "model/llama_impl.h"
#include "nmkit/format.h"
#include "nmkit/slide.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/threads.h"

namespace nmkit {

using model::kGroups;
using model::kLinearGroup;

Status LlamaParams::validate() const {
  auto bad = [](const char* what, int64_t v) {
    return Error("llama: " + std::string(what) + " = " + std::to_string(v) + " is not supported");
  };
  if (model::find_family(arch) == nullptr) {
    return Error("model: architecture '" + arch + "' is not supported (supported: " + model::family_list() + ")");
  }
  if (n_vocab < 1) return bad("n_vocab", n_vocab);
  if (n_embd < 1) return bad("n_embd", n_embd);
  if (n_layer < 1) return bad("n_layer", n_layer);
  if (n_head < 1 || (n_embd_head == 0 && n_embd % n_head != 0)) return bad("n_head (must divide n_embd)", n_head);
  if (n_embd_head < 0) return bad("head size", n_embd_head);
  if (head_dim() < 2 || head_dim() % 2 != 0) return bad("head size (must be even for rope)", head_dim());
  if (n_head_kv < 1 || n_head % n_head_kv != 0) return bad("n_head_kv (must divide n_head)", n_head_kv);
  if (n_ff < 1) return bad("n_ff", n_ff);
  if (n_ctx_train < 1) return bad("n_ctx_train", n_ctx_train);
  // An infinite eps or base runs without an error but computes nothing useful (perplexity equal to
  // the vocabulary size, no text generated: issue 24, item 5).
  if (!(rms_eps > 0.0f) || !std::isfinite(rms_eps)) {
    return Error("llama: rms_eps = " + std::to_string(rms_eps) + " is not a positive finite number");
  }
  if (!(rope_base > 0.0f) || !std::isfinite(rope_base)) {
    return Error("llama: rope_base = " + std::to_string(rope_base) + " is not a positive finite number");
  }
  if (!(rope_scale > 0.0f) || !std::isfinite(rope_scale)) return Error("llama: rope_scale = " + std::to_string(rope_scale) + " is not positive");
  if (!(query_scale >= 0.0f)) return Error("llama: query_scale = " + std::to_string(query_scale) + " is negative");
  if (!rope_factors.empty() && rope_factors.size() != static_cast<size_t>(head_dim() / 2)) {
    return Error("llama: rope_freqs.weight has " + std::to_string(rope_factors.size()) + " factors, head size " +
                 std::to_string(head_dim()) + " needs " + std::to_string(head_dim() / 2));
  }
  for (size_t i = 0; i < rope_factors.size(); ++i) {
    if (!(rope_factors[i] > 0.0f) || !std::isfinite(rope_factors[i])) {
      return Error("llama: rope_freqs.weight[" + std::to_string(i) + "] = " + std::to_string(rope_factors[i]) +
                   " is not a positive factor");
    }
  }
  if (sliding_window < 0) return bad("sliding_window", sliding_window);
  if (sliding_window > 0) {
    if (sliding_window > n_ctx_train) {
      return Error("llama: sliding_window = " + std::to_string(sliding_window) + " is larger than the context of " +
                   std::to_string(n_ctx_train));
    }
    if (local_layers.size() != static_cast<size_t>(n_layer)) {
      return Error("llama: " + std::to_string(local_layers.size()) + " local-layer flags for " + std::to_string(n_layer) +
                   " layers");
    }
    if (!(rope_base_local > 0.0f) || !std::isfinite(rope_base_local)) {
      return Error("llama: rope_base_local = " + std::to_string(rope_base_local) + " is not positive");
    }
  }
  return ok_status();
}

Result<LinearFormat> parse_linear_format(std::string_view text) {
  if (text == "dense") return LinearFormat::Dense;
  if (text == "sparse24") return LinearFormat::Sparse24;
  if (text == "nm") return LinearFormat::NM;
  if (text == "slid") return LinearFormat::Slid;
  return Error(ErrorCode::InvalidArgument, "format '" + std::string(text) + "' is not dense, sparse24, nm or slid");
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
  return Error(ErrorCode::InvalidArgument, "weights '" + std::string(text) + "' is not f32, bf16 or int8");
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
    return Error(ErrorCode::InvalidArgument, "model: weights " + std::string(dtype_name(weights)) + " is not f32, bf16 or int8");
  }
  if (format == LinearFormat::Dense) return ok_status();
  if (!pattern) return Error(ErrorCode::InvalidArgument, "model: format " + std::string(linear_format_name(format)) + " needs a pattern");
  if (format == LinearFormat::Sparse24 && !(*pattern == Pattern{2, 4})) {
    return Error(ErrorCode::InvalidArgument, "model: format sparse24 needs pattern 2:4, not " + pattern->str());
  }
  if (format == LinearFormat::NM && pattern->group > 16) {
    return Error(ErrorCode::InvalidArgument, "model: format nm supports groups up to 16, not " + pattern->str());
  }
  if (format == LinearFormat::Slid && !pattern->slidable()) {
    return Error(ErrorCode::InvalidArgument, "model: format slid needs a pattern keep:2N with keep <= 2N-2, not " + pattern->str());
  }
  return ok_status();
}

Tensor convert_rows(const TensorView& w, DType dtype) {
  Tensor out = Tensor::empty(dtype, w.shape);
  constexpr int64_t kChunk = 1 << 16;
  const int64_t n = w.numel();
  const size_t from = dtype_size(w.dtype), to = dtype_size(dtype);
  parallel_for((n + kChunk - 1) / kChunk, 4, [&](int64_t c0, int64_t c1) {
    std::vector<float> values(static_cast<size_t>(kChunk));
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t i0 = c * kChunk, count = std::min(kChunk, n - i0);
      convert_to_f32(w.dtype, w.data + static_cast<size_t>(i0) * from, values.data(), static_cast<size_t>(count));
      convert_from_f32(dtype, values.data(), out.data() + static_cast<size_t>(i0) * to, static_cast<size_t>(count));
    }
  });
  return out;
}

LinearOptions linear_options(DType weights, LinearFormat format) {
  LinearOptions lo;
  lo.int8 = weights == DType::I8;
  // bf16 weights take bf16 activations (each linear's input rounded to nearest even, as llama.cpp's
  // BF16 type does): oneDNN then runs its AVX512-BF16 GEMM (bf16 x bf16 -> f32) instead of an f32 GEMM
  // on a widened copy, and the small-M kernels use vdpbf16ps (docs/data.md).
  lo.bf16_activations = weights == DType::BF16 && format != LinearFormat::Slid;
  return lo;
}

// A dense f32 or bf16 layer over `parts` converted to `weights` (bf16 to nearest even), each into a
// tensor the layer holds and reads in place: no stacked copy and no packed copy beside the converted
// one, so converting costs no memory beyond what the layer keeps (docs/design.md 11.7).
Result<SparseLinear> pack_dense_held(const std::vector<TensorView>& parts, DType weights, const LinearOptions& lo,
                                     const std::string& name) {
  auto held = std::make_shared<std::vector<Tensor>>();
  held->reserve(parts.size());
  std::vector<TensorView> views;
  for (const TensorView& part : parts) {
    held->push_back(convert_rows(part, weights));
    views.push_back(held->back().view());
  }
  auto linear = SparseLinear::dense(views, held, lo);
  if (!linear.ok()) return linear.error().with_context(name + ": ");
  return linear;
}

DType packed_values_dtype(DType weights, LinearFormat format, DType source) {
  if (weights != DType::I8 && format != LinearFormat::Slid) return weights;
  return source == DType::F16 ? DType::F32 : source;
}

// Packs a dense(-masked) weight [rows, K] in F32, F16 or BF16 as `format` in the `weights` dtype.
// f32 and bf16 forms convert the values (exactly, or rounded to nearest even for bf16); int8 forms
// quantize the values as they are (docs/design.md 6), so a BF16 file's weights are never widened.
Result<SparseLinear> pack_linear(const TensorView& w, DType weights, LinearFormat format,
                                 const std::optional<Pattern>& pattern, const std::string& name) {
  NMKIT_TRY(check_format(weights, format, pattern));
  LinearOptions lo = linear_options(weights, format);
  if (format == LinearFormat::Dense && weights != DType::I8) return pack_dense_held({w}, weights, lo, name);
  const DType form = packed_values_dtype(weights, format, w.dtype);
  Tensor converted;
  TensorView view = w;
  if (w.dtype != form) {
    converted = convert_rows(w, form);
    view = converted.view();
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

// An Error naming the first non-finite element of an F32, F16 or BF16 tensor (docs/design.md 2),
// scanned in chunks over the pool.
Status check_finite(const TensorView& t, const std::string& name) {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t n = t.numel();
  const size_t size = dtype_size(t.dtype);
  std::atomic<int64_t> bad{-1};
  parallel_for((n + kChunk - 1) / kChunk, 4, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t i0 = c * kChunk, count = std::min(kChunk, n - i0);
      // On the stored bits: no conversion (a bf16 check once converted each chunk to f32 first).
      const int64_t i = first_non_finite_stored(t.dtype, t.data + static_cast<size_t>(i0) * size, count);
      if (i >= 0) {
        int64_t seen = bad.load();
        while ((seen < 0 || i0 + i < seen) && !bad.compare_exchange_weak(seen, i0 + i)) {
        }
      }
    }
  });
  const int64_t i = bad.load();
  if (i < 0) return ok_status();
  float value = 0;
  convert_to_f32(t.dtype, t.data + static_cast<size_t>(i) * size, &value, 1);
  // A matrix's value by row and column, as pruning names one it finds.
  const std::string where = t.shape.size() == 2 && t.shape[1] > 0
                                ? "row " + std::to_string(i / t.shape[1]) + ", column " + std::to_string(i % t.shape[1])
                                : "element " + std::to_string(i);
  return Error(name + ": " + where + " is " + std::to_string(value));
}

namespace {

// Rows of `parts` (one dtype) stacked into one [sum rows, K] tensor (the linears that share an input
// run as one SparseLinear: fewer calls and thread hand-offs per token; N:M groups run along K, so
// stacking rows changes no group).
Tensor stack_rows(const std::vector<TensorView>& parts) {
  int64_t rows = 0;
  for (const TensorView& p : parts) rows += p.rows();
  Tensor out = Tensor::empty(parts[0].dtype, {rows, parts[0].cols()});
  std::byte* dst = out.data();
  for (const TensorView& p : parts) {
    NMKIT_ASSERT(p.dtype == parts[0].dtype);
    std::memcpy(dst, p.data, p.nbytes());
    dst += p.nbytes();
  }
  return out;
}

}  // namespace

Tensor* Block::vector(std::string_view gguf) {
  static constexpr std::pair<const char*, Tensor Block::*> kMembers[] = {
      {"attn_norm.weight", &Block::attn_norm},
      {"ffn_norm.weight", &Block::ffn_norm},
      {"attn_q_norm.weight", &Block::attn_q_norm},
      {"attn_k_norm.weight", &Block::attn_k_norm},
      {"post_attention_norm.weight", &Block::attn_post_norm},
      {"post_ffw_norm.weight", &Block::ffn_post_norm},
      {"attn_q.bias", &Block::q_bias},
      {"attn_k.bias", &Block::k_bias},
      {"attn_v.bias", &Block::v_bias}};
  for (const auto& [name, member] : kMembers) {
    if (gguf == name) return &(this->*member);
  }
  return nullptr;
}

Shape linear_shape(const LlamaParams& p, int i) {
  const int64_t d = p.n_embd, hd = p.head_dim();
  const Shape shapes[7] = {{p.n_head * hd, d}, {p.n_head_kv * hd, d}, {p.n_head_kv * hd, d}, {d, p.n_head * hd},
                           {p.n_ff, d},        {p.n_ff, d},           {d, p.n_ff}};
  return shapes[i];
}

namespace {

// The weights of linear group g, in block order.
std::vector<TensorView> group_parts(const std::vector<TensorView>& weights, int g) {
  std::vector<TensorView> parts;
  for (int i = 0; i < 7; ++i) {
    if (kLinearGroup[i] == g) parts.push_back(weights[static_cast<size_t>(i)]);
  }
  return parts;
}

bool reads_in_place(const std::vector<TensorView>& parts, DType weights, LinearFormat format) {
  if (format != LinearFormat::Dense || (weights != DType::F32 && weights != DType::BF16)) return false;
  for (const TensorView& part : parts) {
    if (part.dtype != weights) return false;
  }
  return true;
}

}  // namespace

Status Block::pack_group(int g, const ModelOptions& o, int64_t b, const std::vector<TensorView>& weights,
                         LinearFormat format, const std::optional<Pattern>& pattern,
                         const std::shared_ptr<const void>& owner) {
  std::vector<TensorView> parts = group_parts(weights, g);
  bool same_dtype = true;
  for (const TensorView& part : parts) same_dtype &= part.dtype == parts.front().dtype;
  const std::string name = block_tensor_name(b, kGroups[g].label);
  Result<SparseLinear> linear = Error("");
  const bool dense_float = format == LinearFormat::Dense && (o.weights == DType::F32 || o.weights == DType::BF16);
  if (dense_float) NMKIT_TRY(check_format(o.weights, format, pattern));
  if (owner && reads_in_place(parts, o.weights, format)) {
    // Dense weights stored in the model's own dtype are read where they lie, the parts unstacked
    // (docs/design.md 11.7: a model holds one copy of each weight).
    linear = SparseLinear::dense(parts, owner, linear_options(o.weights, format));
    if (!linear.ok()) return linear.error().with_context(name + ": ");
  } else if (dense_float) {
    linear = pack_dense_held(parts, o.weights, linear_options(o.weights, format), name);  // part by part
  } else if (format == LinearFormat::Dense && same_dtype && parts[0].dtype != DType::F16) {
    // int8: each part quantized as it lies, the codes stacked (no stacked copy of the source).
    NMKIT_TRY(check_format(o.weights, format, pattern));
    linear = SparseLinear::dense(parts, nullptr, linear_options(o.weights, format));
    if (!linear.ok()) linear = linear.error().with_context(name + ": ");
  } else {
    std::vector<Tensor> widened;  // parts of mixed dtypes (an HF q/k converted beside v read in place)
    if (!same_dtype) {
      for (TensorView& part : parts) {
        if (part.dtype == DType::F32) continue;
        widened.push_back(convert_rows(part, DType::F32));
        part = widened.back().view();
      }
    }
    // One part is packed from where it lies; several are stacked first.
    Tensor stacked;
    if (parts.size() > 1) stacked = stack_rows(parts);
    const TensorView group = parts.size() > 1 ? stacked.view() : parts[0];
    widened.clear();
    linear = pack_linear(group, o.weights, format, pattern, name);
  }
  if (!linear.ok()) {
    // Weights quantized or pruned on load were not checked finite before (load_weight): a NaN or
    // infinity is named by its own tensor, row and column, not by the stacked group's part.
    const std::vector<TensorView> sources = group_parts(weights, g);
    size_t part = 0;
    for (size_t i = 0; i < 7; ++i) {
      if (kLinearGroup[i] != g) continue;
      NMKIT_TRY(check_finite(sources[part++], block_tensor_name(b, LlamaModel::block_linear_names()[i])));
    }
    return linear.error();
  }
  linears[static_cast<size_t>(g)] = std::make_unique<SparseLinear>(std::move(linear.value()));
  formats[static_cast<size_t>(g)] = format;
  patterns[static_cast<size_t>(g)] = pattern;
  return ok_status();
}

Status Block::prune_pack_group(int g, const ModelOptions& o, int64_t b, const std::vector<TensorView>& weights) {
  NMKIT_ASSERT(o.pattern && (o.format == LinearFormat::NM || o.format == LinearFormat::Sparse24));
  NMKIT_TRY(check_format(o.weights, o.format, o.pattern));
  const std::vector<TensorView> parts = group_parts(weights, g);
  bool same_dtype = true;
  int64_t rows = 0;
  for (const TensorView& part : parts) {
    same_dtype &= part.dtype == parts.front().dtype;
    rows += part.rows();
  }
  // Parts of mixed dtypes are compressed as f32, as pack_group widens them before stacking.
  const DType form = packed_values_dtype(o.weights, o.format, same_dtype ? parts[0].dtype : DType::F32);
  const std::string name = block_tensor_name(b, kGroups[g].label);
  const int64_t K = parts[0].cols();
  const LinearOptions lo = linear_options(o.weights, o.format);
  // Each part pruned straight into its rows of the group's compressed tensor, named by its own tensor.
  auto fill = [&](auto& packed) -> Status {
    int64_t row0 = 0;
    size_t part = 0;
    for (size_t i = 0; i < 7; ++i) {
      if (kLinearGroup[i] != g) continue;
      const TensorView& w = parts[part++];
      NMKIT_TRY(prune_compress(w, *o.pattern, o.method, {}, packed, row0, nullptr,
                               block_tensor_name(b, LlamaModel::block_linear_names()[i])));
      row0 += w.rows();
    }
    return ok_status();
  };
  Result<SparseLinear> linear = Error("");
  if (o.weights == DType::I8) {
    // INT8: each slice of the group's rows pruned, quantized and placed in the records while in
    // cache; the packed float values and the codes of the whole group never exist (design 11.7).
    std::atomic<bool> fill_failed{false};  // the pruning's own errors are returned as they are;
                                            // slices are filled on several threads
    auto fill_slice = [&](int64_t slice0, auto& slice) -> Status {
      const int64_t slice1 = slice0 + slice.rows();
      int64_t part0 = 0;
      size_t part = 0;
      for (size_t i = 0; i < 7; ++i) {
        if (kLinearGroup[i] != g) continue;
        const TensorView& w = parts[part++];
        const int64_t first = std::max(slice0, part0), last = std::min(slice1, part0 + w.rows());
        if (first < last) {
          const std::string part_name = block_tensor_name(b, LlamaModel::block_linear_names()[i]);
          const TensorView rows_of_w{w.dtype, {last - first, K},
                                     w.data + static_cast<size_t>((first - part0) * K) * dtype_size(w.dtype)};
          Status pruned = prune_compress(rows_of_w, *o.pattern, o.method, {}, slice, first - slice0, nullptr, part_name);
          if (!pruned.ok()) {
            fill_failed = true;
            // A NaN or infinity named by its row and column in its own tensor, not in the slice.
            NMKIT_TRY(check_finite(w, part_name));
            return pruned;
          }
        }
        part0 += w.rows();
      }
      return ok_status();
    };
    linear = o.format == LinearFormat::NM
                 ? SparseLinear::nm_int8_by_rows(rows, K, *o.pattern, form, fill_slice, lo)
                 : SparseLinear::sparse24_int8_by_rows(rows, K, form, fill_slice, lo);
    if (!linear.ok() && fill_failed) return linear.error();
  } else if (o.format == LinearFormat::NM) {
    NMPacked packed = empty_nm(form, rows, K, *o.pattern);
    NMKIT_TRY(fill(packed));
    linear = SparseLinear::nm(packed, lo);
  } else {
    Sparse24 packed = empty_sparse24(form, rows, K);
    NMKIT_TRY(fill(packed));
    linear = SparseLinear::sparse24(packed, lo);
  }
  if (!linear.ok()) return linear.error().with_context(name + ": ");
  linears[static_cast<size_t>(g)] = std::make_unique<SparseLinear>(std::move(linear.value()));
  formats[static_cast<size_t>(g)] = o.format;
  patterns[static_cast<size_t>(g)] = o.pattern;
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
  ModelTensors tensors;
  tensors.load_f32 = load;
  return build(params, tensors, options);
}


Result<LlamaModel> LlamaModel::build(const LlamaParams& params, const ModelTensors& tensors,
                                     const ModelOptions& asked) {
  NMKIT_TRY(params.validate());
  auto resolved = model_options_for(tensors, asked);
  if (!resolved.ok()) return resolved.error();
  const ModelOptions& options = *resolved;
  NMKIT_TRY(model::check_format(options.weights, options.format, options.pattern));  // before any loading
  if (options.format != LinearFormat::Dense && !options.pattern) {
    return Error("model: format " + std::string(linear_format_name(options.format)) + " needs --pattern");
  }
  if (options.pattern && options.method != PruneMethod::Magnitude) {
    return Error("model: pruning on load supports the magnitude method only (calibrated methods prune "
                 "through the model, docs/design.md 12)");
  }
  if (!tensors.load_f32) return Error("model: no tensor loader");
  // A model that cannot fit is refused before anything is read (issue 25, bad input).
  const size_t needed = estimate_bytes(params, options);
  if (needed > 0) {
    const MemoryBudget budget = available_memory();
    if (!budget.limit.empty() && needed > budget.bytes) {
      return Error("model: the " + weight_form_name(options) + " form needs at least " + decimal_bytes(needed) + ", " +
                   decimal_bytes(budget.bytes) + " available (" + budget.limit + ")");
    }
  }
  release_freed_memory_eagerly();  // the build's temporaries leave the process as they are freed
  // ... but large ones are first offered to the next group's temporaries (src/core/page_bytes.h), up
  // to 1/20 of the form's bytes: the kept mappings add to the build's peak, which the weights' 10%
  // margin bounds (docs/design.md 11.7).
  const PageRecycling recycling(needed / 20);
  const TensorLoader& load = tensors.load_f32;
  auto impl = std::make_unique<Impl>();
  impl->params = params;
  impl->family = &model::family_of(params);
  impl->options = options;
  impl->source = tensors;
  const int64_t d = params.n_embd;
  auto embd = model::load_embedding(tensors, params);
  if (!embd.ok()) return embd.error();
  impl->token_embd = std::move(embd.value());
  auto out_norm = model::load_checked(load, "output_norm.weight", {d});
  if (!out_norm.ok()) return out_norm.error();
  impl->output_norm = std::move(out_norm.value());

  impl->blocks.resize(static_cast<size_t>(params.n_layer));
  for (int64_t b = 0; b < params.n_layer; ++b) {
    model::Block& block = impl->blocks[static_cast<size_t>(b)];
    for (const model::BlockVector& v : impl->family->vectors) {
      const std::string name = "blk." + std::to_string(b) + "." + v.gguf;
      auto t = model::load_checked(load, name, {model::vector_size(v.size, params)});
      if (!t.ok()) return t.error();
      Tensor* member = block.vector(v.gguf);
      NMKIT_ASSERT(member != nullptr);
      *member = std::move(t.value());
    }
    if (tensors.packed) {  // the linears run where their records lie
      for (int g = 0; g < model::kGroupCount; ++g) {
        auto layer = model::packed_layer(tensors, model::packed_group_prefix(b, g),
                                         model::linear_options(options.weights, options.format));
        if (!layer.ok()) return layer.error();
        block.linears[static_cast<size_t>(g)] = std::make_unique<SparseLinear>(std::move(*layer));
        block.formats[static_cast<size_t>(g)] = options.format;
        block.patterns[static_cast<size_t>(g)] = options.pattern;
      }
      NMKIT_TRY(invoke_callback(options.on_block, "model build progress", b, params.n_layer));
      continue;
    }
    // Group by group (q/k/v, o, gate/up, down), each weight read (in place where the file stores it as
    // F32/F16/BF16), pruned and packed, then freed and its file pages released before the next: the
    // transient memory is one group's weights in the file's dtype (f32 where it is quantized).
    std::vector<model::Weight> weights(7);
    std::vector<TensorView> views(7);
    if (options.keep_dense_weights) block.dense.resize(7);
    // nm and sparse24 forms pruned on load take each weight straight from its source into the
    // group's compressed rows (no dense-masked copy, no stacked one); slid forms, and a model that
    // keeps the dense weights, prune into a dense-masked tensor first.
    const bool prune_compressed = options.pattern && !options.keep_dense_weights &&
                                  (options.format == LinearFormat::NM || options.format == LinearFormat::Sparse24);
    for (int g = 0; g < model::kGroupCount; ++g) {
      for (size_t i = 0; i < 7; ++i) {
        if (model::kLinearGroup[i] != g) continue;
        const std::string name = model::block_tensor_name(b, block_linear_names()[i]);
        const bool checked_later = options.pattern || options.weights == DType::I8;
        auto w = model::load_weight(tensors, name, model::linear_shape(params, static_cast<int>(i)), !checked_later);
        if (!w.ok()) return w.error();
        weights[i] = std::move(*w);
        if (options.pattern && !prune_compressed) {
          auto pruned = prune(weights[i].view, *options.pattern, options.method, {}, name);
          if (!pruned.ok()) return pruned.error();
          weights[i] = model::Weight{std::move(pruned->pruned), {}, nullptr};
          weights[i].view = weights[i].owned.view();
        }
        views[i] = weights[i].view;
      }
      std::shared_ptr<const void> owner;  // set when every weight of the group lies in the file
      for (size_t i = 0; i < 7; ++i) {
        if (model::kLinearGroup[i] != g) continue;
        if (!weights[i].owner) {
          owner = nullptr;
          break;
        }
        owner = weights[i].owner;
      }
      if (prune_compressed) {
        NMKIT_TRY(block.prune_pack_group(g, options, b, views));
      } else {
        NMKIT_TRY(block.pack_group(g, options, b, views, options.format, options.pattern, owner));
      }
      const bool in_place = owner && model::reads_in_place(model::group_parts(views, g), options.weights, options.format);
      for (size_t i = 0; i < 7; ++i) {
        if (model::kLinearGroup[i] != g) continue;
        if (options.keep_dense_weights) block.dense[i] = model::f32_copy(weights[i]);
        weights[i] = model::Weight();
        // A weight read in place keeps its pages: the layer reads them on every call. Any other
        // (converted, pruned, quantized) is done with its source: its pages leave the process.
        if (!in_place) model::release(tensors, model::block_tensor_name(b, block_linear_names()[i]));
      }
    }
    NMKIT_TRY(invoke_callback(options.on_block, "model build progress", b, params.n_layer));
  }

  // The head stays dense (docs/design.md 11.5), in the model's weight dtype; a tied head is packed
  // from the embedding's stored bytes where they are F32/F16/BF16 (no f32 table), and the embedding
  // is then looked up in them.
  const std::string head_name = params.tied_output ? "token_embd.weight" : "output.weight";
  if (tensors.packed && !tensors.packed->head_reads_embedding) {
    auto head = model::packed_layer(tensors, "output", model::linear_options(options.weights, LinearFormat::Dense));
    if (!head.ok()) return head.error();
    impl->head = std::make_unique<SparseLinear>(std::move(*head));
    return LlamaModel(std::move(impl));
  }
  model::Weight output;
  if (params.tied_output) {
    const auto& stored = impl->token_embd.stored();
    const auto dtype = stored ? model::float_dtype(stored->type) : std::nullopt;
    if (dtype) {
      output.view = TensorView{*dtype, stored->shape, stored->data};
      output.owner = stored->owner;
    } else {
      output.owned = impl->token_embd.to_f32();
    }
  } else {
    auto w = model::load_weight(tensors, head_name, {params.n_vocab, d});
    if (!w.ok()) return w.error();
    output = std::move(*w);
  }
  if (output.view.data == nullptr) output.view = output.owned.view();
  // Read in place when the file stores it in the model's dtype (f32 or bf16), as the block linears.
  const bool in_place = output.owner && output.view.dtype == options.weights &&
                        (options.weights == DType::F32 || options.weights == DType::BF16);
  auto head = in_place ? SparseLinear::dense({output.view}, output.owner,
                                             model::linear_options(options.weights, LinearFormat::Dense))
                       : model::pack_linear(output.view, options.weights, LinearFormat::Dense, std::nullopt, head_name);
  if (!head.ok()) return head.error().with_context(in_place ? head_name + ": " : "");
  impl->head = std::make_unique<SparseLinear>(std::move(head.value()));
  impl->head_reads_embedding = in_place && params.tied_output;
  if (!params.tied_output && options.keep_dense_weights) impl->output = model::f32_copy(output);
  output = model::Weight();
  if (!in_place) model::release(tensors, head_name);
  return LlamaModel(std::move(impl));
}

Result<TensorView> LlamaModel::dense_weight(int64_t b, std::string_view name) const {
  NMKIT_TRY(impl_->check_linear(b, name));
  const model::Block& block = impl_->blocks[static_cast<size_t>(b)];
  if (block.dense.empty()) return Error("model: dense weights were not kept (ModelOptions::keep_dense_weights)");
  return block.dense[static_cast<size_t>(model::linear_index(name))].view();
}

Result<Tensor> LlamaModel::load_dense_weight(int64_t b, std::string_view name) const {
  NMKIT_TRY(impl_->check_linear(b, name));
  const model::Block& block = impl_->blocks[static_cast<size_t>(b)];
  const auto i = static_cast<size_t>(model::linear_index(name));
  if (!block.dense.empty()) return Tensor::copy_of(block.dense[i].view());
  const Shape shape = model::linear_shape(impl_->params, static_cast<int>(i));
  const std::string tensor_name = model::block_tensor_name(b, name);
  auto w = model::load_weight(impl_->source, tensor_name, shape);
  if (!w.ok()) return w.error();
  if (options().pattern) {  // pruned on load: the weight the model runs
    auto pruned = prune(w->view, *options().pattern, options().method, {}, tensor_name);
    if (!pruned.ok()) return pruned.error();
    return pruned->pruned.dtype() == DType::F32 ? std::move(pruned->pruned)
                                                : model::convert_rows(pruned->pruned.view(), DType::F32);
  }
  return model::f32_copy(*w);
}

Status LlamaModel::replace_block(int64_t b, const std::vector<TensorView>& weights, LinearFormat format,
                                 std::optional<Pattern> pattern) {
  if (b < 0 || b >= impl_->params.n_layer) return impl_->check_linear(b, "attn_q");
  model::Block& block = impl_->blocks[static_cast<size_t>(b)];
  if (weights.size() != 7) return Error("model: replace_block needs the 7 linears of a block");
  for (int i = 0; i < 7; ++i) {
    const Shape shape = model::linear_shape(impl_->params, i);
    const TensorView& w = weights[static_cast<size_t>(i)];
    if (w.dtype != DType::F32 || w.shape != shape) {
      return Error(model::block_tensor_name(b, block_linear_names()[static_cast<size_t>(i)]) + ": replacement " +
                   std::string(dtype_name(w.dtype)) + " " + shape_str(w.shape) + " does not match F32 " +
                   shape_str(shape));
    }
  }
  for (int g = 0; g < model::kGroupCount; ++g) {
    // A group that read its weights in place leaves the file's pages behind once repacked: they are
    // dropped (11.7), so a model pruned block by block holds one copy of each weight, not two.
    const bool was_in_place = block.linears[static_cast<size_t>(g)] && block.linears[static_cast<size_t>(g)]->borrowed_bytes() > 0;
    NMKIT_TRY(block.pack_group(g, impl_->options, b, weights, format, pattern));
    if (!was_in_place) continue;
    for (size_t i = 0; i < 7; ++i) {
      if (model::kLinearGroup[i] == g) model::release(impl_->source, model::block_tensor_name(b, block_linear_names()[i]));
    }
  }
  if (!block.dense.empty()) {
    for (size_t i = 0; i < 7; ++i) block.dense[i] = Tensor::copy_of(weights[i]);
  }
  return ok_status();
}

Result<TensorView> LlamaModel::block_vector(int64_t b, std::string_view gguf) const {
  NMKIT_TRY(impl_->check_linear(b, "attn_q"));
  const Tensor* v = impl_->blocks[static_cast<size_t>(b)].vector(gguf);
  if (v == nullptr) return Error("model: no block vector '" + std::string(gguf) + "'");
  return v->view();
}

Status LlamaModel::replace_block_vector(int64_t b, std::string_view gguf, const TensorView& value) {
  NMKIT_TRY(impl_->check_linear(b, "attn_q"));
  Tensor* v = impl_->blocks[static_cast<size_t>(b)].vector(gguf);
  if (v == nullptr) return Error("model: no block vector '" + std::string(gguf) + "'");
  if (value.dtype != DType::F32 || value.shape != v->shape()) {
    return Error("blk." + std::to_string(b) + "." + std::string(gguf) + ": replacement " +
                 std::string(dtype_name(value.dtype)) + " " +
                 shape_str(value.shape) + " does not match F32 " + shape_str(v->shape()));
  }
  *v = Tensor::copy_of(value);
  return ok_status();
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
  std::vector<TensorView> views;
  for (const Tensor& t : block.dense) views.push_back(t.view());
  Status status = block.pack_group(g, impl_->options, b, views, format, pattern);
  if (!status.ok()) current = std::move(previous);
  return status;
}

Result<std::vector<NamedTensor>> LlamaModel::tensors() const {
  const Impl& m = *impl_;
  if (!m.options.keep_dense_weights) return Error("model: tensors() needs ModelOptions::keep_dense_weights");
  std::vector<NamedTensor> out;
  for (const model::ModelTensorName& t : model::model_tensor_names(m.params)) {
    if (t.gguf == "token_embd.weight") {
      out.push_back({t.gguf, m.token_embd.to_f32()});
      if (!m.params.rope_factors.empty()) {  // llama3 rope scaling, where convert_hf_to_gguf.py puts it
        Tensor factors = Tensor::empty(DType::F32, {m.params.head_dim() / 2});
        std::copy(m.params.rope_factors.begin(), m.params.rope_factors.end(), factors.as<float>());
        out.push_back({"rope_freqs.weight", std::move(factors)});
      }
      continue;
    }
    if (t.gguf == "output_norm.weight") {
      out.push_back({t.gguf, Tensor::copy_of(m.output_norm.view())});
      continue;
    }
    if (t.gguf == "output.weight") {
      out.push_back({t.gguf, Tensor::copy_of(m.output.view())});
      continue;
    }
    // blk.B.<name>: a block linear or one of the family's vectors.
    const size_t dot = t.gguf.find('.', 4);
    const int64_t b = std::stoll(t.gguf.substr(4, dot - 4));
    const std::string local = t.gguf.substr(dot + 1);
    const model::Block& block = m.blocks[static_cast<size_t>(b)];
    const std::string_view linear = std::string_view(local).substr(0, local.size() - 7);  // less ".weight"
    const int i = local.size() > 7 && local.ends_with(".weight") ? model::linear_index(linear) : -1;
    const Tensor* value = i >= 0 ? &block.dense[static_cast<size_t>(i)] : block.vector(local);
    NMKIT_ASSERT(value != nullptr);
    out.push_back({t.gguf, Tensor::copy_of(value->view())});
  }
  return out;
}

std::string LlamaModel::linear_kernel_name(int64_t M) const {
  return impl_->blocks[0].linears[model::kGroupGateUp]->kernel_name(M);
}

std::string LlamaModel::head_kernel_name(int64_t M) const { return impl_->head->kernel_name(M); }

}  // namespace nmkit
