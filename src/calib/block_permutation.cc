// Applying a block's free permutations (docs/design.md 12.2) to its weights, Hessians and model.
#include <string>

#include "model/family.h"
#include "nmkit/permute.h"

namespace nmkit {

ChannelOrder output_columns(const LlamaParams& p, const ChannelOrder& value) {
  if (value.empty()) return {};
  const int64_t hd = p.head_dim(), per_kv = p.n_head / p.n_head_kv;
  ChannelOrder cols(static_cast<size_t>(p.n_head * hd));
  for (int64_t h = 0; h < p.n_head; ++h) {
    const int64_t g = h / per_kv;
    for (int64_t i = 0; i < hd; ++i) {
      cols[static_cast<size_t>(h * hd + i)] =
          static_cast<int32_t>(h * hd + (value[static_cast<size_t>(g * hd + i)] - g * hd));
    }
  }
  return cols;
}

namespace {

Tensor as_f32(const TensorView& w) {
  return w.dtype == DType::F32 ? Tensor::copy_of(w) : Tensor::from_f32(to_f32(w), w.shape);
}

// dst[r][j] = w[row(r)][col(j)] for w [rows, K] as f32.
template <class Row, class Col>
Tensor gather(const TensorView& w, Row row, Col col) {
  const Tensor src = as_f32(w);
  const int64_t rows = w.shape[0], K = w.shape[1];
  Tensor out = Tensor::empty(DType::F32, w.shape);
  const float* s = src.as<float>();
  float* d = out.as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* from = s + row(r) * K;
    for (int64_t j = 0; j < K; ++j) d[r * K + j] = from[col(j)];
  }
  return out;
}

}  // namespace

Tensor permute_rows(const TensorView& w, const ChannelOrder& perm) {
  if (perm.empty()) return as_f32(w);
  return gather(w, [&](int64_t r) { return int64_t{perm[static_cast<size_t>(r)]}; }, [](int64_t j) { return j; });
}

Tensor permute_columns(const TensorView& w, const ChannelOrder& perm) {
  if (perm.empty()) return as_f32(w);
  return gather(w, [](int64_t r) { return r; }, [&](int64_t j) { return int64_t{perm[static_cast<size_t>(j)]}; });
}

std::vector<double> permute_symmetric(std::vector<double> H, int64_t K, const ChannelOrder& perm) {
  if (perm.empty()) return H;
  std::vector<double> out(H.size());
  for (int64_t i = 0; i < K; ++i) {
    const int64_t pi = perm[static_cast<size_t>(i)];
    for (int64_t j = 0; j < K; ++j) out[static_cast<size_t>(i * K + j)] = H[static_cast<size_t>(pi * K + perm[static_cast<size_t>(j)])];
  }
  return out;
}

Tensor permute_block_linear(const LlamaParams& p, const BlockPermutation& perm, std::string_view name, Tensor w) {
  if (name == "ffn_gate" || name == "ffn_up") return perm.ffn.empty() ? std::move(w) : permute_rows(w.view(), perm.ffn);
  if (name == "ffn_down") return perm.ffn.empty() ? std::move(w) : permute_columns(w.view(), perm.ffn);
  if (name == "attn_v") return perm.value.empty() ? std::move(w) : permute_rows(w.view(), perm.value);
  if (name == "attn_output") {
    return perm.value.empty() ? std::move(w) : permute_columns(w.view(), output_columns(p, perm.value));
  }
  return w;  // attn_q, attn_k: rope pairs their channels, they never move
}

Status check_permutable(const LlamaParams& p) {
  const model::Family* family = model::find_family(p.arch);
  if (family == nullptr) return Error("--permute: unknown model family '" + p.arch + "'");
  for (const model::BlockVector& v : family->vectors) {
    const std::string name = v.gguf;
    if (name.starts_with("attn_v.") && name != "attn_v.bias") {
      return Error(std::string("--permute: the ") + family->name + " family's block vector " + name +
                   " is not one the permutation can move (docs/design.md 12.2)");
    }
  }
  return ok_status();
}

Status permute_block(LlamaModel& model, int64_t b, const BlockPermutation& perm) {
  const LlamaParams& p = model.params();
  NMKIT_TRY(check_permutable(p));
  std::vector<Tensor> weights;
  std::vector<TensorView> views;
  for (const std::string& name : LlamaModel::block_linear_names()) {
    auto w = model.load_dense_weight(b, name);
    if (!w.ok()) return w.error();
    weights.push_back(permute_block_linear(p, perm, name, std::move(*w)));
  }
  for (const Tensor& t : weights) views.push_back(t.view());
  NMKIT_TRY(model.replace_block(b, views, LinearFormat::Dense));
  if (!perm.value.empty()) {
    auto bias = model.block_vector(b, "attn_v.bias");
    if (bias.ok() && bias->data != nullptr && bias->shape.size() == 1) {
      const Tensor moved = permute_rows(TensorView{DType::F32, {bias->numel(), 1}, bias->data}, perm.value);
      NMKIT_TRY(model.replace_block_vector(b, "attn_v.bias", TensorView{DType::F32, {bias->numel()}, moved.data()}));
    }
  }
  return ok_status();
}

}  // namespace nmkit
