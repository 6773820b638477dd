// ModelSource's state and the pieces its GGUF and Hugging Face halves share.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nmkit/model_source.h"
#include "nmkit/safetensors.h"

namespace nmkit {

struct ModelSource::Impl {
  Kind kind = Kind::Gguf;
  std::string path;
  std::string architecture;
  LlamaParams params;
  std::vector<std::string> names;  // GGUF names, GGUF order
  std::vector<std::string> files;  // ModelSource::input_files()
  std::optional<GgufFile> gguf;
  // Hugging Face: the shards, and where each GGUF-named tensor lives.
  struct HfTensor {
    size_t shard = 0;
    std::string hf_name;
    int64_t permute_heads = 0;  // attn_q: n_head, attn_k: n_head_kv, others 0 (no permutation)
    bool plus_one = false;      // a Gemma norm weight: 1 is added on load
  };
  std::vector<SafetensorsFile> shards;
  std::vector<std::string> shard_paths;
  std::unordered_map<std::string, HfTensor> hf;
  std::string tokenizer_json;
  std::optional<PackedForm> packed;  // a packed model file's form (docs/design.md 11.9)
};

namespace model_source {

// The tensors of a llama model with `params`, GGUF names in GGUF order, with their nmkit shapes.
std::vector<std::pair<std::string, Shape>> expected_tensors(const LlamaParams& params);

// The halves of ModelSource::open; each fills `impl` (path already set) or returns the Error.
Status open_gguf(ModelSource::Impl& impl);
Status open_hf(ModelSource::Impl& impl);
Result<Tensor> load_hf(const ModelSource::Impl& impl, const ModelSource::Impl::HfTensor& where, std::string_view name);

// "architecture 'X' is not supported (supported: llama)"
std::string unsupported_architecture(const std::string& arch);

}  // namespace model_source
}  // namespace nmkit
