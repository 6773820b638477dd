// Where a model's weights and tokenizer come from (any family nmkit runs, docs/design.md 11.8): a
// GGUF file, or a Hugging Face checkpoint
// directory (config.json, model.safetensors or model-0000x-of-0000y.safetensors shards listed in
// model.safetensors.index.json, tokenizer.json). Both are presented the same way: llama.cpp's GGUF
// tensor names, f32 tensors [rows, K], and q/k rows in GGUF's rope-NORM order (docs/design.md
// section 11.1), so that LlamaModel::build runs either through loader().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/gguf.h"
#include "nmkit/model.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"
#include "nmkit/tokenizer.h"

namespace nmkit {

class ModelSource {
 public:
  enum class Kind { Gguf, HuggingFace };

  // Opens PATH: a file starting with the GGUF magic, or a folder holding config.json. Validates on
  // open, each failure one line naming the file and value: a supported architecture (names it and
  // lists supported_architectures()), the hyper-parameters (GGUF `ARCH.*` keys, or config.json's
  // vocab_size, hidden_size, ...; LlamaParams::validate), no rope scaling but linear and llama3, no
  // partial rotary, and every tensor of the model present with the shape the hyper-parameters imply,
  // in a dtype or ggml type nmkit reads (others are an Error naming the tensor and type). Unknown tensors are refused.
  static Result<ModelSource> open(const std::string& path);
  ModelSource(ModelSource&&) noexcept;
  ModelSource& operator=(ModelSource&&) noexcept;
  ~ModelSource();

  // GGUF architectures: {"llama", "qwen2", "qwen3", "gemma3"} (config.json model_types: llama,
  // mistral, qwen2, qwen3, gemma3_text).
  static const std::vector<std::string>& supported_architectures();

  Kind kind() const;
  const std::string& path() const;
  const std::string& architecture() const;  // the GGUF architecture ("llama" for a Mistral folder too)
  // n_vocab (llama.vocab_size, else the token list's length, else token_embd's rows), n_embd,
  // n_layer, n_head, n_head_kv (defaults to n_head), n_ff, n_ctx_train, rms_eps, rope_base (10000
  // when absent), tied_output (no output.weight; HF: tie_word_embeddings).
  const LlamaParams& params() const;

  // GGUF names in GGUF order: token_embd.weight, output_norm.weight, output.weight (when not tied),
  // then per block blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
  // ffn_up, ffn_down}.weight.
  const std::vector<std::string>& tensor_names() const;
  bool has_tensor(std::string_view name) const;
  // The tensor as F32 [rows, K] (norms [n]): GGUF dequantized (GgufFile::dequantize); HF converted
  // from F32/F16/BF16, with attn_q/attn_k rows permuted as llama.cpp's convert_hf_to_gguf.py
  // `permute` does (within each head, HF row s*d/2 + i becomes row 2i + s). Error for an unknown name.
  Result<Tensor> load_f32(std::string_view name) const;
  // load_f32 as a TensorLoader for LlamaModel::build (valid while this object lives).
  TensorLoader loader() const;
  // The tensor's stored bytes in place (MappedTensor), or nullopt for a Hugging Face q/k weight (its
  // rows are permuted on load). The view keeps the file mapped after this object is gone.
  std::optional<MappedTensor> stored(std::string_view name) const;
  // Drops the pages of the tensor's stored bytes from this process's memory (read again, they come
  // back from the page cache): for a model that has converted the tensor.
  void release(std::string_view name) const;
  // load_f32, stored and release for LlamaModel::build; they keep the source's files open and
  // mapped for as long as the model (or any copy of them) lives.
  ModelTensors tensors() const;

  // Every file this source reads or a writer copies from it: the GGUF file; for a folder its
  // config.json, model.safetensors.index.json, shards, tokenizer.json, tokenizer_config.json,
  // generation_config.json and special_tokens_map.json (those present). An output must be none of
  // them (issue 24, item 1).
  const std::vector<std::string>& input_files() const;

  // The GGUF file itself (metadata for writers that keep it, the tokenizer); nullptr for HF.
  const GgufFile* gguf() const;
  // Tokenizer source: for HF, the tokenizer.json path ("" when the folder has none); for GGUF, ""
  // (the tokenizer is in gguf()'s metadata: Tokenizer::from_gguf).
  const std::string& tokenizer_json() const;

  struct Impl;  // opaque: defined in src/model

 private:
  explicit ModelSource(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

// The source's tokenizer: a GGUF file's tokenizer.ggml.* keys (Tokenizer::from_gguf) or a Hugging Face
// folder's tokenizer.json (Tokenizer::from_hf_json). An Error naming the path when it has none, or
// when check_vocabulary refuses it.
Result<Tokenizer> load_tokenizer(const ModelSource& source);
// A tokenizer with more tokens than the model's vocabulary (token_embd rows) would feed the model ids
// it has no row for: an Error naming the model and both counts (issue 24, item 7). Fewer is allowed
// (vocabularies padded to a multiple of 64, say); generate samples only the tokenizer's ids.
Status check_vocabulary(const ModelSource& source, const Tokenizer& tokenizer);

}  // namespace nmkit
