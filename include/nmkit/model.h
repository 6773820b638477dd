// A llama decoder running on nmkit's kernels (docs/design.md section 11.2): embeddings, RMSNorm, rope
// NORM, grouped-query attention with a KV cache, SwiGLU, tied or separate output head. Every linear
// is a SparseLinear, so one model runs with weights as dense f32, bf16 or int8, or pruned on load
// (docs/design.md 11.5: only the attention and MLP linears) and packed as sparse24, nm or slid.
// Attention, norms and the residual stream are f32.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/dtype.h"
#include "nmkit/gguf.h"
#include "nmkit/linear.h"
#include "nmkit/pattern.h"
#include "nmkit/prune.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

// Hyper-parameters of a decoder of one of the families nmkit runs (GGUF keys `ARCH.*`, docs/design.md
// 11.2 and 18). What a family's blocks hold (norms, biases, activation, rope mode) is the family's
// (src/model/family_*.cc, looked up by `arch`); the numbers of one model are here.
struct LlamaParams {
  std::string arch = "llama";  // the family: GGUF general.architecture (ModelSource::supported_architectures)
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd_head = 0;  // head size (ARCH.attention.key_length); 0: n_embd / n_head
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  bool tied_output = true;  // no output.weight: the head is token_embd
  // Rope of the global (non-sliding) layers: angles p * rope_scale * base^(-2i/d) / rope_factors[i]
  // (rope_scale: 1 / ARCH.rope.scaling.factor of a "linear" scaling; rope_factors: the llama3
  // scaling's rope_freqs.weight, head_dim/2 values, empty for none).
  float rope_scale = 1.0f;
  std::vector<float> rope_factors;
  // Sliding-window attention: a local layer attends to the last `sliding_window` positions (its own
  // included) and turns by rope_base_local, unscaled; local_layers[b] != 0 marks them (empty: none).
  int64_t sliding_window = 0;
  float rope_base_local = 10000.0f;
  std::vector<uint8_t> local_layers;
  // Scores are q.k * query_scale; 0: 1 / sqrt(head_dim()).
  float query_scale = 0.0f;
  int64_t head_dim() const { return n_embd_head > 0 ? n_embd_head : n_head > 0 ? n_embd / n_head : 0; }
  bool is_local(int64_t b) const {
    return sliding_window > 0 && b >= 0 && static_cast<size_t>(b) < local_layers.size() &&
           local_layers[static_cast<size_t>(b)] != 0;
  }
  // An Error naming the first impossible value (an unknown family, n_embd not a multiple of n_head
  // without an explicit head size, odd head size, n_head not a multiple of n_head_kv, non-positive
  // sizes, eps or rope base not positive and finite, rope factors not head_dim/2 positive values, a window of local layers larger
  // than the training context, local_layers not n_layer long).
  Status validate() const;
};

// The model's tensors by GGUF name ("token_embd.weight", "output_norm.weight", "output.weight",
// "blk.B.attn_norm.weight", "blk.B.attn_q.weight", ...), each as f32: matrices [rows, K], norms [n].
// An absent tensor is an Error naming it.
using TensorLoader = std::function<Result<Tensor>(const std::string& name)>;

// A tensor's bytes as its file stores them, viewed in place in the file's read-only mapping: `shape`
// is nmkit's ([rows, K], or [n]), the rows lie one after another from `data`, each `row_bytes`
// long, in ggml `type` (F32, F16, BF16 or a block type such as Q8_0; safetensors' F32/F16/BF16 are
// the same types). `owner` keeps the mapping alive for as long as a model reads the bytes.
struct MappedTensor {
  GgmlType type = GgmlType::F32;
  Shape shape;
  const std::byte* data = nullptr;
  size_t row_bytes = 0;
  std::shared_ptr<const void> owner;
};

// How the block linears are held and run after pruning (docs/design.md 4 and 5): a checkpoint's WeightFormat
// plus Slid, which a checkpoint stores as a dense or sparse24 weight with a slide record.
enum class LinearFormat { Dense, Sparse24, NM, Slid };
Result<LinearFormat> parse_linear_format(std::string_view text);  // "dense" | "sparse24" | "nm" | "slid"
std::string_view linear_format_name(LinearFormat format);

// The form a packed model file (`nmkit pack`, docs/design.md 11.9) holds its linears in: each block's
// four linear groups and the head as packed records, run in place from the file's mapping.
struct PackedForm {
  DType weights = DType::F32;
  LinearFormat format = LinearFormat::Dense;
  std::optional<Pattern> pattern;
  // The head reads the embedding's stored bytes (a tied head in the embedding's dtype): no records.
  bool head_reads_embedding = false;
};

// Where LlamaModel::build reads a model's tensors, by GGUF name (docs/design.md 14: a model holds its
// packed weights and nothing else that scales with it).
struct ModelTensors {
  // The tensor as f32 (q/k rows in GGUF order). Required.
  TensorLoader load_f32;
  // The tensor's stored bytes in place, when its rows are in GGUF order as stored (a Hugging Face
  // q/k weight is not: its rows are permuted on load); nullopt otherwise, or when unset. The
  // embedding is then looked up row by row from them, and a weight whose stored dtype is its packed
  // form's is read where it lies.
  std::function<std::optional<MappedTensor>(const std::string& name)> stored;
  // Called once the model will not read a tensor's stored bytes again (it converted them): their
  // pages may leave memory (ModelSource drops them from the mapping). Optional.
  std::function<void(const std::string& name)> release;
  // Set for a packed model file: the linears come from its records ("blk.B.attn_qkv.nmkit.form",
  // ".nmkit.values", ... through `stored`), not from weights; build() runs the file's form only.
  std::optional<PackedForm> packed;
};

// "f32" | "bf16" | "int8" -> F32, BF16, I8.
Result<DType> parse_weight_dtype(std::string_view text);

// One linear packed as LlamaModel packs its block linears (ModelOptions::weights and ::format): `w`
// is a dense(-masked) [rows, K] weight (f32, f16 or bf16, read as f32); bf16 rounds it and runs bf16
// activations, int8 quantizes it per row; sparse24, nm and slid compress it with `pattern` (slid
// runs int8). Errors name `name`. What Python's nmkit.SparseLinear builds.
Result<SparseLinear> pack_linear(const TensorView& w, DType weights, LinearFormat format,
                                 const std::optional<Pattern>& pattern, std::string_view name = "");

struct ModelOptions {
  // Weights of every linear, the head included: F32, BF16 (rounded to nearest even) or I8 (per output
  // channel, with activations quantized per token on every call; SparseLinear's int8 option).
  DType weights = DType::F32;
  // Prune on load: the block linears (q, k, v, o, gate, up, down) pruned along K with `method`, then
  // stored in `format`. Unset: no pruning (format must be Dense). sparse24 needs 2:4; slid needs a
  // slidable pattern and runs int8 (whatever `weights` says); nm runs f32 or bf16.
  std::optional<Pattern> pattern;
  PruneMethod method = PruneMethod::Magnitude;
  LinearFormat format = LinearFormat::Dense;
  // Hold each block linear's dense f32 weight (after pruning) next to its packed form: needed by
  // dense_weight(), replace_linear() and tensors() (calibrated pruning, saving). About 4 bytes per
  // linear weight more memory.
  bool keep_dense_weights = false;
  // Called after each block is built (b = 0 .. n_layer-1), for a progress line.
  std::function<void(int64_t b, int64_t n_layer)> on_block;
};
// The options a model of `tensors` is built with: `asked`, except for a packed model file
// (ModelTensors::packed), which runs its own form: taken when `asked` names none (f32 dense, no
// pattern), an Error when it names another or asks to keep dense weights.
Result<ModelOptions> model_options_for(const ModelTensors& tensors, const ModelOptions& asked);
// The form's name in reports: "f32 dense", "bf16 2:4 sparse24", "int8 6:8 slid".
std::string weight_form_name(const ModelOptions& options);

class LlamaModel;

// A KV cache and the scratch buffers of one sequence. Layout of the cache of a layer: K transposed,
// (n_head_kv, head_dim, n_ctx), so that the scores of a query over all positions are a sum over
// head_dim of contiguous rows (vectorizes without reordering float sums); V (n_head_kv, n_ctx,
// head_dim). Sized for n_ctx positions once, at creation; the pages of positions not yet written
// take no memory.
class LlamaSession {
 public:
  // An Error naming the bytes when the cache of n_ctx positions cannot be allocated.
  static Result<LlamaSession> create(const LlamaModel& model, int64_t n_ctx);
  // The same, throwing std::bad_alloc on that failure.
  LlamaSession(const LlamaModel& model, int64_t n_ctx);
  LlamaSession(LlamaSession&&) noexcept;
  LlamaSession& operator=(LlamaSession&&) noexcept;
  ~LlamaSession();
  int64_t n_ctx() const;
  int64_t position() const;  // tokens in the cache
  void reset();              // empties the cache (buffers are kept)
  // Bytes of the KV cache of n_ctx positions for `params` (what create() allocates).
  static size_t cache_bytes(const LlamaParams& params, int64_t n_ctx);

  struct Impl;  // opaque: defined in src/model

 private:
  friend class LlamaModel;
  explicit LlamaSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The input of a block linear seen by run_block's hook: `names` are the linears that read it
// ("attn_q", "attn_k", "attn_v" share one input; "ffn_gate", "ffn_up" another), x is [tokens, K].
struct LinearInput {
  const std::vector<std::string>& names;
  const float* x;
  int64_t tokens;
  int64_t K;
};
using LinearHook = std::function<Status(const LinearInput& input)>;

// A tensor of the model under its GGUF name, f32 (block linears dense-masked after pruning).
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

class LlamaModel {
 public:
  // Builds every layer from `load` (tensor names and shapes checked against `params`).
  static Result<LlamaModel> build(const LlamaParams& params, const ModelTensors& tensors,
                                  const ModelOptions& options = {});
  // The same from f32 tensors alone (tests, models made in memory).
  static Result<LlamaModel> build(const LlamaParams& params, const TensorLoader& load,
                                  const ModelOptions& options = {});
  LlamaModel(LlamaModel&&) noexcept;
  LlamaModel& operator=(LlamaModel&&) noexcept;
  ~LlamaModel();

  const LlamaParams& params() const;
  const ModelOptions& options() const;
  // The linears of a block in GGUF order: attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up,
  // ffn_down.
  static const std::vector<std::string>& block_linear_names();

  // Runs n tokens at positions session.position() .. +n-1 through the model, appending to the cache,
  // and writes the logits of tokens logits_from .. n-1 to `logits` ((n - logits_from) x n_vocab f32;
  // logits_from = n writes none). Errors: n < 1, a token outside the vocabulary (naming it), or a
  // cache too short for the tokens. Allocates nothing once the session has run n tokens at once.
  Status forward(LlamaSession& session, const int32_t* tokens, int64_t n, float* logits,
                 int64_t logits_from) const;

  // --- Block-by-block access for calibrated pruning (docs/design.md 12) ---
  // hidden [n, n_embd] = token_embd rows of the tokens.
  Status embed(const int32_t* tokens, int64_t n, float* hidden) const;
  // Block b on n_seq sequences of seq_len tokens each, hidden [n_seq * seq_len, n_embd] in place;
  // every sequence is causal from position 0 (no KV cache). The sequences run in groups of at most
  // kBlockGroupTokens tokens (at least one sequence; bounded scratch); the hook, when set, sees the
  // input of each linear for each group, in order, before it runs (an Error from it is returned).
  static constexpr int64_t kBlockGroupTokens = 2048;
  Status run_block(int64_t b, float* hidden, int64_t n_seq, int64_t seq_len,
                   const LinearHook& hook = {}) const;
  // The final norm and head on hidden [n, n_embd]: logits [n, n_vocab].
  Status head(const float* hidden, int64_t n, float* logits) const;
  // The dense f32 weight of block b's linear `name` [rows, K] (after any pruning on load). Needs
  // options.keep_dense_weights.
  Result<TensorView> dense_weight(int64_t b, std::string_view name) const;
  // The dense f32 weight of block b's linear `name` as the model runs it (after any pruning on load):
  // a copy of the kept weight, or read from the model's source again (the model holds only packed
  // forms unless it keeps dense weights).
  Result<Tensor> load_dense_weight(int64_t b, std::string_view name) const;
  // Repacks all of block b's linears from `weights` (the 7 of block_linear_names(), f32 [rows, K],
  // dense-masked) in `format` (pattern: the one they comply with), in this model's weight dtype.
  // Needs no kept dense weights (kept ones are replaced too).
  Status replace_block(int64_t b, const std::vector<TensorView>& weights, LinearFormat format,
                       std::optional<Pattern> pattern = std::nullopt);
  // Block b's f32 vector of GGUF name `gguf` ("attn_v.bias"), without data when its family has none; an
  // Error for a name no family has.
  Result<TensorView> block_vector(int64_t b, std::string_view gguf) const;
  // Replaces it by `value` (f32, the same shape): a channel permutation moves the v bias
  // (docs/design.md 12.2).
  Status replace_block_vector(int64_t b, std::string_view gguf, const TensorView& value);
  // Replaces block b's linear `name` by `weight` (f32 [rows, K], dense-masked) stored in `format`
  // (pattern: the one the weight complies with, for sparse24/nm/slid), in this model's weight dtype.
  // Needs options.keep_dense_weights (linears sharing an input are packed together).
  Status replace_linear(int64_t b, std::string_view name, const TensorView& weight,
                        LinearFormat format, std::optional<Pattern> pattern = std::nullopt);

  // Every tensor under its GGUF name in GGUF order (token_embd, output_norm, output if separate,
  // then per block attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up,
  // ffn_down), f32. Needs options.keep_dense_weights.
  Result<std::vector<NamedTensor>> tensors() const;

  // Bytes of packed weights one decode step streams (every block linear and the head).
  size_t weight_bytes_per_token() const;
  // Bytes of weights the model holds (docs/design.md 14): every linear's packed form and the forms
  // it built for large calls, the embedding (f32 when built from f32 tensors, else its bytes in the
  // file's mapping, counted whole), norms, and dense weights kept for calibration. With a KV cache
  // and bounded scratch, what a process running the model needs.
  size_t resident_bytes() const;
  // Bytes of the weights in their storage formats (what a checkpoint of this model holds; "size on
  // disk"): block linears packed as docs/design.md 4 and 5 lay them out (dense rows x K; sparse24 and nm
  // values plus metadata bytes; slid as int8 sparse24 over K_prime), the embedding and a separate
  // head dense, all in the weight dtype with a f32 scale per row for int8; norms f32.
  size_t storage_bytes() const;
  // storage_bytes() of a model with `params` built with `options` (plus its dense f32 block weights when
  // it keeps them): about the bytes it will hold, known before any tensor is read. build() refuses a
  // model whose estimate exceeds the memory available.
  static size_t estimate_bytes(const LlamaParams& params, const ModelOptions& options);
  // The packed layers under their record names (docs/design.md 11.9): "blk.B.attn_qkv",
  // "blk.B.attn_output", "blk.B.ffn_gate_up", "blk.B.ffn_down" per block, then "output" for the
  // head unless it reads the embedding in place. What a packed model file stores.
  std::vector<std::pair<std::string, const SparseLinear*>> packed_layers() const;
  bool head_reads_embedding() const;
  // The kernel names of a block linear and of the head, for reports ("avx512 sparse24 f32").
  std::string linear_kernel_name(int64_t M) const;
  std::string head_kernel_name(int64_t M) const;

  struct Impl;  // opaque: defined in src/model

 private:
  explicit LlamaModel(std::unique_ptr<Impl> impl);
  friend class LlamaSession;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nmkit
