// Saving a LlamaModel's weights (after pruning on load or calibrated pruning) as a GGUF file that
// llama.cpp-compatible readers load, or as a Hugging Face folder of the model's family (docs/design.md
// 11.1 and 11.8).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <utility>
#include <string>

#include "nmkit/dtype.h"
#include "nmkit/model.h"
#include "nmkit/model_source.h"
#include "nmkit/safetensors.h"
#include "nmkit/status.h"

namespace nmkit {

// Writes LlamaModel::tensors() (needs ModelOptions::keep_dense_weights) in the source GGUF's tensor
// order (GGUF order for a Hugging Face source) as `dtype`
// (F32, F16 or BF16; norms stay F32, as llama.cpp's converter keeps 1-D tensors), with the source
// GGUF's metadata in its order and general.file_type set to the dtype's llama.cpp file type (0 F32,
// 1 F16, 32 BF16); for a Hugging Face source, general.architecture and the family's ARCH.* keys from
// the parameters (no tokenizer keys; Mistral is written as llama, as llama.cpp's converter does).
// Atomic (write_gguf); an Error names the path.
Status write_model_gguf(const std::string& path, const LlamaModel& model, const ModelSource& source,
                        DType dtype = DType::F32);

// A model saved as a Hugging Face folder (docs/design.md section 11.1, "Writing a Hugging Face
// folder"), which nmkit (ModelSource) loads, in the layout transformers reads (its family's class:
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM; not
// run against transformers in the tests, which have no torch):
//   config.json             the family's hyper-parameters from the model's LlamaParams (model_type
//                           llama, mistral, qwen2, qwen3 or gemma3_text; an HF source's own
//                           config.json, with torch_dtype set to the written dtype; a llama3 rope
//                           scaling whose factors no config states is an Error)
//   model.safetensors       LlamaModel::tensors() under HF names (model.layers.N.self_attn.q_proj.weight,
//                           ...), q/k rows permuted back to HF's rotate-halves order (the exact inverse
//                           of ModelSource's load), `dtype` F32/F16/BF16 (norms stay F32, as in
//                           write_model_gguf), metadata
//                           {"format": "pt"}; tied models store no lm_head.weight
//   tokenizer.json, tokenizer_config.json, generation_config.json
//                           from a GGUF source's tokenizer (hf_tokenizer_files; none for a GGUF
//                           without tokenizer keys or with a SentencePiece one); copied from an HF
//                           source folder (with special_tokens_map.json) when it has them
// Atomic as a whole: everything is written into DIR.tmp.XXXXXX beside DIR and renamed onto DIR only
// when complete (an existing DIR is swapped out with renameat2(RENAME_EXCHANGE) and then removed,
// and only when it holds nothing but the files listed here, so no other folder is ever replaced).
// On error the temporary folder is removed and DIR is untouched; a temporary folder left by a
// killed process (not locked, older than the write) is removed by the next write to DIR.
// `on_tensor` reports progress.
Status write_model_hf(const std::string& dir, const LlamaModel& model, const ModelSource& source,
                      DType dtype = DType::F32,
                      const std::function<void(size_t i, size_t n, const OutputTensor&)>& on_tensor = {});

// Whether write_model_hf may write DIR: absent, or a folder holding nothing but the files it writes
// (an Error naming the first other entry, or saying DIR is not a folder). write_model_hf checks it
// too; callers with long work before the write check first.
Status check_hf_output_folder(const std::string& dir);

// The files of a Hugging Face folder that hold a GGUF file's tokenizer (tokenizer.ggml.*): a GPT-2
// byte-level BPE (tokenizer.ggml.model "gpt2") with a pre type Tokenizer supports, its pre-tokenizer
// written in the form Tokenizer::from_hf_json recognises; control tokens become special added
// tokens, user-defined ones plain added tokens; add_bos/add_eos a TemplateProcessing post-processor.
// SentencePiece ("llama") vocabularies are an Error naming the file and the model type (write_model_hf
// then writes the folder without tokenizer files).
struct HfTokenizerFiles {
  std::string tokenizer_json, tokenizer_config_json, generation_config_json;
  int32_t bos = -1, eos = -1, pad = -1;  // for config.json
};
Result<HfTokenizerFiles> hf_tokenizer_files(const GgufFile& file, int64_t n_ctx_train);

// The Hugging Face name of a tensor's GGUF name (token_embd.weight -> model.embed_tokens.weight,
// blk.N.attn_q.weight -> model.layers.N.self_attn.q_proj.weight, ...; the family's names), and the
// heads its rows are permuted by (rope-NORM families' attn_q: n_head, attn_k: n_head_kv, else 0);
// nullopt for a name outside the model.
std::optional<std::pair<std::string, int64_t>> hf_tensor_name(const std::string& gguf_name, const LlamaParams& params);

// A tensor (GGUF name, f32) as a Hugging Face folder of the model's family stores it: its HF name,
// q/k rows permuted back for rope-NORM families, Gemma's norm weights less one (docs/design.md 11.8);
// nullopt for a name outside the model (rope_freqs.weight too: config.json's rope_scaling holds it).
std::optional<NamedTensor> hf_tensor_from_gguf(const NamedTensor& gguf, const LlamaParams& params);

// Rows of a q/k weight [heads * d, K] from GGUF's rope-NORM order back to HF's: within each head,
// GGUF row 2i + s becomes HF row s*d/2 + i (the inverse of convert_hf_to_gguf.py's permute).
Tensor hf_rows_from_gguf(const Tensor& weight, int64_t heads);

}  // namespace nmkit
