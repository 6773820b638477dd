// A model family (docs/design.md 11.8): what its decoder blocks hold and do, stated once in the family's
// file (family_llama.cc with Mistral, family_qwen.cc for Qwen2 and Qwen3, family_gemma3.cc) and
// consulted by the loaders, the forward pass and the writers instead of branches on the architecture.
// The public reference for every key and tensor name is llama.cpp (src/models/ARCH.cpp, and its
// converter's conversion/*.py).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/hf_config.h"
#include "nmkit/gguf.h"
#include "nmkit/model.h"

namespace nmkit::model {

// Rope modes (ggml's): NORM turns pairs (2i, 2i+1) of a head; NEOX turns pairs (i, i + d/2).
enum class RopeMode { Norm, Neox };
// The feed-forward's gate: silu(g) * u, or gelu_tanh(g) * u with gelu_tanh(g) = g/2 (1 + tanh(
// sqrt(2/pi) (g + 0.044715 g^3))).
enum class Activation { Silu, GeluTanh };

// A block tensor other than the seven linears, and the length it has in a model.
enum class VectorSize { Embd, HeadDim, QRows, KvRows };
struct BlockVector {
  const char* gguf;  // blk.N.<gguf>: "attn_norm.weight", "attn_q.bias", ...
  const char* hf;    // model.layers.N.<hf>: "input_layernorm.weight", "self_attn.q_proj.bias", ...
  VectorSize size;
  bool is_norm;      // an RMSNorm weight (Gemma's Hugging Face form stores it less one)
};

struct Family {
  const char* name;            // LlamaParams::arch ("llama", "mistral", "qwen2", "qwen3", "gemma3")
  const char* gguf_arch;       // general.architecture a GGUF of it has (Mistral's is "llama")
  const char* hf_model_type;   // config.json model_type
  const char* hf_class;        // config.json architectures[0]
  RopeMode rope = RopeMode::Norm;
  Activation activation = Activation::Silu;
  bool embed_scale = false;    // embeddings x sqrt(n_embd) (Gemma)
  bool qkv_bias = false;       // q, k and v add a bias (Qwen2)
  bool qk_norm = false;        // RMSNorm of each q and k head before rope (Qwen3, Gemma 3)
  bool post_norms = false;     // attention and feed-forward outputs normed before the residual (Gemma 3)
  // Hugging Face norm weights w stand for 1 + w (Gemma's RMSNorm); GGUF stores 1 + w (llama.cpp's
  // converter adds the 1), and so does nmkit.
  bool hf_norm_plus_one = false;
  bool hf_tied_default = false;  // config.json's tie_word_embeddings when absent (transformers' default)
  const char* hf_activation = "silu";  // config.json's hidden_act (Gemma: hidden_activation) it must have
  // The block's tensors other than the seven linears, in nmkit's GGUF order: those named before
  // "ffn_norm.weight" come before the feed-forward linears. The norms attn_norm and ffn_norm are
  // every family's.
  std::vector<BlockVector> vectors;

  // Each of the four below may be null: the family has nothing of its own there.
  // The family's GGUF keys beyond those every family has (model_source_gguf.cc), read into p; an
  // Error names the file and key. Refuses what the forward pass does not run.
  Status (*read_gguf)(const GgufFile& file, LlamaParams& p) = nullptr;
  // config.json beyond the keys every family has (model_source_hf.cc); refuses what the forward pass
  // does not run.
  Status (*read_hf)(const HfConfig& config, LlamaParams& p) = nullptr;
  // The family's own GGUF keys for p (prefix "ARCH."), after those every family has.
  void (*write_gguf)(const LlamaParams& p, std::vector<GgufKeyValue>& keys) = nullptr;
  // The family's own config.json fields for p, after those every family has.
  void (*write_hf)(const LlamaParams& p, nlohmann::ordered_json& config) = nullptr;

  bool hf_permutes_qk() const { return rope == RopeMode::Norm; }  // convert_hf_to_gguf.py's permute
  bool has(std::string_view vector_gguf) const;
};

// The family named `name` (LlamaParams::arch), or nullptr.
const Family* find_family(std::string_view name);
// The family of a GGUF general.architecture, or nullptr.
const Family* find_gguf_family(std::string_view gguf_arch);
// The family of a config.json model_type, or nullptr.
const Family* find_hf_family(std::string_view model_type);
// The family of params.arch; an internal error (assert) for an unknown one (validate() refuses it).
const Family& family_of(const LlamaParams& p);

// Length of a block vector in a model with p.
int64_t vector_size(VectorSize size, const LlamaParams& p);

// The families' descriptions (one file each).
extern const Family kLlamaFamily;
extern const Family kMistralFamily;
extern const Family kQwen2Family;
extern const Family kQwen3Family;
extern const Family kGemma3Family;

}  // namespace nmkit::model

namespace nmkit::model {

// GGUF architectures and config.json model types nmkit runs, for messages and
// ModelSource::supported_architectures().
std::vector<std::string> gguf_architectures();
std::vector<std::string> hf_model_types();

// A GGUF key's value when present (an Error naming the key when its type is wrong), nullopt when absent.
Result<std::optional<double>> optional_float(const GgufFile& file, const std::string& key);
Result<std::optional<uint64_t>> optional_uint(const GgufFile& file, const std::string& key);

// An Error when config.json's `key` is true: "'KEY' is true: WHAT is not supported".
Status refuse_true(const HfConfig& config, const char* key, const std::string& what);

// Llama 3.x's rope factor of pair i (family_llama.cc): convert_hf_to_gguf.py's formula over the
// frequency 1 / base^(2i/d) in float32 (torch's) and its wavelength 2 pi / f in double.
double llama3_rope_factor(const LlamaParams& p, int64_t i, double factor, double low_freq_factor,
                          double high_freq_factor, double original_context);

// llama.cpp's set_swa_pattern: every `period`-th layer global (layers period-1, 2 period-1, ...), the
// others local; period 0: every layer local.
std::vector<uint8_t> periodic_local_layers(int64_t n_layer, int64_t period);

}  // namespace nmkit::model

namespace nmkit::model {
// "llama, mistral, qwen2, qwen3, gemma3": the families, for messages.
std::string family_list();
}  // namespace nmkit::model

namespace nmkit::model {

// A tensor of a model under its GGUF and Hugging Face names (convert_hf_to_gguf.py's map), its shape,
// and what the Hugging Face form differs by: q/k rows permuted (rope NORM families: HF row s*d/2 + i
// of a head is GGUF row 2i + s), or a Gemma norm weight stored less one.
struct ModelTensorName {
  std::string gguf, hf;
  Shape shape;
  int64_t permute_heads = 0;  // attn_q: n_head, attn_k: n_head_kv, else 0
  bool plus_one = false;
};
// Every tensor of a model with p in nmkit's GGUF order: token_embd, output_norm, output (when not
// tied), then per block the family's vectors named before ffn_norm, attn_q, attn_k, attn_v,
// attn_output, ffn_norm and the vectors after it, ffn_gate, ffn_up, ffn_down. rope_freqs.weight is
// not among them (ModelSource and the writers add it).
std::vector<ModelTensorName> model_tensor_names(const LlamaParams& p);

}  // namespace nmkit::model
