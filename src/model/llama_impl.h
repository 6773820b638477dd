// LlamaModel's insides, shared by the build (llama_build.cc) and the forward pass (llama_forward.cc):
// a decoder of any family (family.h), whose blocks hold what its family states.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/linear.h"
#include "model/embedding.h"
#include "nmkit/model.h"

namespace nmkit::model {

struct Family;

// The block linears run as four SparseLinears, one per distinct input: q, k and v stacked (rows
// q then k then v), o, gate and up stacked (gate rows first), down.
constexpr int kGroupQkv = 0;
constexpr int kGroupOutput = 1;
constexpr int kGroupGateUp = 2;
constexpr int kGroupDown = 3;
constexpr int kGroupCount = 4;
// Group of each linear of LlamaModel::block_linear_names().
constexpr int kLinearGroup[7] = {kGroupQkv, kGroupQkv, kGroupQkv, kGroupOutput,
                                 kGroupGateUp, kGroupGateUp, kGroupDown};
struct GroupInfo {
  const char* label;  // in error messages: "blk.3.attn_qkv.weight"
};
constexpr GroupInfo kGroups[kGroupCount] = {{"attn_qkv"}, {"attn_output"}, {"ffn_gate_up"}, {"ffn_down"}};

std::string block_tensor_name(int64_t b, std::string_view name);
// Index of `name` in block_linear_names(), or -1.
inline int linear_index(std::string_view name) {
  const auto& names = LlamaModel::block_linear_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

// An Error for a weight dtype / format / pattern combination the linears cannot run.
Status check_format(DType weights, LinearFormat format, const std::optional<Pattern>& pattern);
// w (F32, F16 or BF16) as `format` in the `weights` dtype.
// The layer options of a linear packed as `format` in the `weights` dtype.
LinearOptions linear_options(DType weights, LinearFormat format);
// The dtype a sparse form's values are compressed in before packing: the model's for f32/bf16 forms;
// for int8 and slid forms the source's as it is (f16 widened to f32), which the quantizer reads, so
// a BF16 file's weights are never widened.
DType packed_values_dtype(DType weights, LinearFormat format, DType source);
Result<SparseLinear> pack_linear(const TensorView& w, DType weights, LinearFormat format,
                                 const std::optional<Pattern>& pattern, const std::string& name);
// The shape [rows, K] of block linear i (LlamaModel::block_linear_names order).
Shape linear_shape(const LlamaParams& p, int i);
// w's values in `dtype` (F32, F16 or BF16; rounded to nearest even where narrower), on the pool.
Tensor convert_rows(const TensorView& w, DType dtype);
// An Error naming the first element of w (F32, F16 or BF16) that is not finite.
Status check_finite(const TensorView& w, const std::string& name);

// Reading a model's tensors from its source (model_weights.cc).
// The loader's f32 tensor `name`, checked for dtype, shape and finite values.
Result<Tensor> load_checked(const TensorLoader& load, const std::string& name, const Shape& shape);
// The embedding in its file's dtype when the source gives its bytes, else as f32.
Result<Embedding> load_embedding(const ModelTensors& src, const LlamaParams& p);
// Gives the source pages of tensor `name` back (where the source can).
void release(const ModelTensors& src, const std::string& name);
// The dtype of a ggml F32, F16 or BF16 tensor; nullopt for the block types.
std::optional<DType> float_dtype(GgmlType type);
// A weight as the model reads it: its stored bytes where the file holds them as F32, F16 or BF16 in
// GGUF row order (read where they lie, through the mapping that ModelTensors keeps open), else its
// values as f32 (dequantized or permuted: a temporary).
struct Weight {
  Tensor owned;
  TensorView view;
  std::shared_ptr<const void> owner;  // what keeps `view` alive when it lies in the file's mapping
};
// finite = false where the caller prunes or quantizes the weight at once: pruning and int8
// quantization find a NaN or infinity themselves and name its row and column (a pass over the
// weight saved).
Result<Weight> load_weight(const ModelTensors& src, const std::string& name, const Shape& shape, bool finite = true);
// The weight as an f32 tensor of its own (calibration keeps the block linears so).
Tensor f32_copy(Weight& w);

// A packed model file (docs/design.md 11.9, llama_build_packed.cc): the record prefix of block b's
// linear group g ("blk.3.attn_qkv"), and the layer stored under `prefix`, run in place.
std::string packed_group_prefix(int64_t b, int g);
Result<SparseLinear> packed_layer(const ModelTensors& src, const std::string& prefix, const LinearOptions& options);

struct Block {
  // The family's vectors (family.h), f32; those a family lacks stay empty.
  Tensor attn_norm, ffn_norm;             // [n_embd]
  Tensor attn_q_norm, attn_k_norm;        // [head_dim] (Qwen3, Gemma 3)
  Tensor attn_post_norm, ffn_post_norm;   // [n_embd] (Gemma 3)
  Tensor q_bias, k_bias, v_bias;          // [n_head * head_dim], [n_head_kv * head_dim] twice (Qwen2)
  // The member holding the vector of GGUF name `gguf` ("attn_q_norm.weight"), nullptr for another name.
  Tensor* vector(std::string_view gguf);
  const Tensor* vector(std::string_view gguf) const { return const_cast<Block*>(this)->vector(gguf); }
  std::array<std::unique_ptr<SparseLinear>, kGroupCount> linears;
  std::array<LinearFormat, kGroupCount> formats{};
  std::array<std::optional<Pattern>, kGroupCount> patterns;
  std::vector<Tensor> dense;  // the 7 f32 weights when kept (ModelOptions::keep_dense_weights)

  // (Re)packs group g from weights (the 7 block linears, F32, F16 or BF16; those of other groups
  // are not read).
  Status pack_group(int g, const ModelOptions& o, int64_t b, const std::vector<TensorView>& weights,
                    LinearFormat format, const std::optional<Pattern>& pattern,
                    const std::shared_ptr<const void>& owner = nullptr);
  // Group g of a model pruned on load (o.pattern) into an nm or sparse24 form: each part of
  // `weights` (as pack_group's, unpruned) pruned straight into the group's compressed rows
  // (prune_compress, docs/design.md 11.7), then packed.
  Status prune_pack_group(int g, const ModelOptions& o, int64_t b, const std::vector<TensorView>& weights);
};

}  // namespace nmkit::model

namespace nmkit {

struct LlamaModel::Impl {
  LlamaParams params;
  const model::Family* family = nullptr;  // params.arch's
  ModelOptions options;
  ModelTensors source;  // where the tensors came from (reloads for writers and calibration)
  model::Embedding token_embd;  // [n_vocab, n_embd] in the file's dtype
  Tensor output_norm;  // f32 [n_embd]
  Tensor output;       // f32 [n_vocab, n_embd] when separate and kept
  std::unique_ptr<SparseLinear> head;
  bool head_reads_embedding = false;  // a tied head read in place from the embedding's stored bytes
  std::vector<model::Block> blocks;

  Status check_linear(int64_t b, std::string_view name) const {
    if (b < 0 || b >= params.n_layer) {
      return Error("model: block " + std::to_string(b) + " is outside 0.." + std::to_string(params.n_layer - 1));
    }
    if (model::linear_index(name) < 0) return Error("model: no block linear '" + std::string(name) + "'");
    return ok_status();
  }
};

}  // namespace nmkit
