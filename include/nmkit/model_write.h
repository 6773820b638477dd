// Saving a model (a source converted as it is, or a LlamaModel after pruning on load or calibrated
// pruning) as a GGUF file that llama.cpp's tools load, or as a Hugging Face folder of the model's
// family (docs/design.md 11.1 and 11.8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "nmkit/dtype.h"
#include "nmkit/files.h"
#include "nmkit/gguf.h"
#include "nmkit/model.h"
#include "nmkit/model_source.h"
#include "nmkit/safetensors.h"
#include "nmkit/status.h"
#include "nmkit/tokenizer.h"

namespace nmkit {

// A model's tensors as the writers below take them: its parameters, and a loader that gives each
// tensor (GGUF name, in GGUF order, with the shape the parameters imply: ModelSource::tensor_names)
// as f32 at the moment it is written, so that converting a model holds one tensor at a time.
struct TensorsToWrite {
  LlamaParams params;
  TensorLoader load;
};
// A source's tensors as they are (nmkit convert); valid while `source` lives.
TensorsToWrite source_tensors(const ModelSource& source);
// A built model's (needs ModelOptions::keep_dense_weights; block linears dense-masked after any
// pruning). Holds LlamaModel::tensors(); each tensor is handed out once and freed as it is written.
Result<TensorsToWrite> model_tensors(const LlamaModel& model);

struct ModelWriteOptions {
  DType dtype = DType::F32;  // of the 2-D tensors: F32, F16 or BF16 (norms stay F32, as llama.cpp's converter keeps 1-D tensors)
  std::function<void(size_t i, size_t n, const OutputTensor&)> on_tensor;  // progress
};

// Bytes of the file write_model_gguf or write_model_hf_weights writes (the tensors' data; headers
// and tokenizer excluded): for checking the free space before long work.
uint64_t model_file_bytes(const LlamaParams& params, DType dtype);

// Every 2-D tensor is converted to options.dtype; a value that the dtype cannot hold (above 65504 in
// magnitude for F16, past the float range once rounded to BF16) is an Error naming the file,
// tensor, element and value, and nothing is written (issue 24, item 5: it used to become +-inf).

// GGUF: the tensors in GGUF order (a GGUF source's own order), Llama 3.x's rope_freqs.weight from
// the parameters' rope factors, with general.file_type set to the dtype's llama.cpp file type (0
// F32, 1 F16, 32 BF16). Metadata: a GGUF source's, in its order; for a Hugging Face source,
// general.architecture and general.name, the family's ARCH.* keys from the parameters (Mistral is
// written as llama, as llama.cpp's converter does), and the tokenizer in llama.cpp's GGUF form
// (gguf_tokenizer_metadata of the folder's tokenizer.json; none when the folder has no
// tokenizer.json), so that llama.cpp's tools load the file. Atomic (write_gguf); an Error names the
// path.
Status write_model_gguf(const std::string& path, const TensorsToWrite& tensors, const ModelSource& source,
                        const ModelWriteOptions& options = {});
Status write_model_gguf(const std::string& path, const LlamaModel& model, const ModelSource& source,
                        DType dtype = DType::F32);

// The metadata write_model_gguf writes for a model of `params` from `source` (before its
// general.file_type): a GGUF source's own keys, or an HF folder's family keys and tokenizer.
Result<std::vector<GgufKeyValue>> model_gguf_metadata(const LlamaParams& params, const ModelSource& source);
// Llama 3.x's rope_freqs.weight (F32) from the parameters' rope factors; nullopt without them.
std::optional<OutputTensor> rope_factors_tensor(const LlamaParams& params);

// A packed model file (docs/design.md 11.9): `model`'s linears as the packed records they run from,
// so that loading the file runs them in place from its mapping, converting nothing (`nmkit pack`).
// A GGUF file that only nmkit reads: the source's metadata (model_gguf_metadata) plus nmkit.packed.*
// keys naming the form, general.alignment 64; the embedding, norms and vectors as the source stores
// them (f32 where it permutes or offsets them); per block linear group and the head (unless it reads
// the embedding in place) a 1-D I32 record header "PREFIX.nmkit.form" and 1-D I8 arrays
// "PREFIX.nmkit.values", ".meta", ".scale", ".sum", ".bias" (those the form has). Atomic (write_gguf).
Status write_packed_model(const std::string& path, const LlamaModel& model, const ModelSource& source,
                          const ModelWriteOptions& options = {});
// The checks before packing (`nmkit pack`, nmkit.pack_model): `path` is one OUT.gguf, and passes
// check_model_output with room for the model in bf16 (f32 for f32 weights), which no packed form
// of it exceeds. Errors name the output as `label` calls it.
Status check_packed_model_output(const std::string& path, DType weights, const ModelSource& source,
                                 const std::string& label);

// The tokenizer.ggml.* keys (and tokenizer.chat_template) that hold `tokenizer` in a GGUF file, as
// llama.cpp's convert_hf_to_gguf.py writes them: model, pre, tokens, token_type, merges (gpt2) or
// scores (llama), bos/eos/unknown/padding ids (those set), add_bos_token, add_eos_token (when true),
// add_space_prefix (llama), chat template (when set). Tokenizer::from_gguf reads them back equal.
std::vector<GgufKeyValue> gguf_tokenizer_metadata(const Tokenizer& tokenizer);

// The weights alone under Hugging Face names and values (hf_tensor_from_gguf: q/k row order, the
// family's norm offset),
// as model.safetensors inside write_model_hf's folder and as `nmkit prune HF_DIR -o X.safetensors`
// writes them to drop into an HF source folder; metadata {"format": "pt"}; tied models store no
// lm_head.weight. Atomic (write_safetensors).
Status write_model_hf_weights(const std::string& path, const TensorsToWrite& tensors,
                              const ModelWriteOptions& options = {});

// A model saved as a Hugging Face folder (docs/design.md section 11.1, "Writing a Hugging Face
// folder"), which nmkit (ModelSource) loads, in the layout transformers reads (its family's class:
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM; not
// run against transformers in the tests, which have no torch):
//   config.json             the family's hyper-parameters from the model's LlamaParams (model_type
//                           llama, mistral, qwen2, qwen3 or gemma3_text; an HF source's own
//                           config.json, with torch_dtype set to the written dtype; a llama3 rope
//                           scaling whose factors no config states is an Error)
//   model.safetensors       write_model_hf_weights
//   tokenizer.json, tokenizer_config.json, generation_config.json
//                           from a GGUF source's tokenizer (hf_tokenizer_files; none for a GGUF
//                           without tokenizer keys or with a SentencePiece one); copied from an HF
//                           source folder (with special_tokens_map.json) when it has them
// Atomic as a whole: everything is written into DIR.tmp.XXXXXX beside DIR (PendingFolder,
// nmkit/files.h) and moved onto DIR only when complete (an existing DIR is swapped out and then
// removed, and only when it holds nothing but the files listed here, so no other folder is ever
// replaced). On error the temporary folder is removed and DIR is untouched.
Status write_model_hf(const std::string& dir, const TensorsToWrite& tensors, const ModelSource& source,
                      const ModelWriteOptions& options = {});
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

// Where a model is written (`nmkit prune MODEL`, `nmkit convert`, Python's nmkit.prune_model), and
// everything checked about it before the long work (issue 24, items 1 and 7; docs/design.md 10.12).
struct ModelOutput {
  enum class Kind { Gguf, HfFolder, HfWeights };
  std::string path;              // as given
  std::string label = "output";  // how errors name it ("-o")
  Kind kind = Kind::Gguf;
  DType dtype = DType::F32;
};

// OUT.gguf; a folder (DIR/, an existing folder, or a last component without a '.'); OUT.safetensors
// for a Hugging Face source only (its weights, to drop into its folder). Anything else ("",
// out.txt) is an Error saying what the output takes; so is a dtype other than F32, F16, BF16.
Result<ModelOutput> parse_model_output(const std::string& output, DType dtype, const ModelSource& source,
                                       const std::string& label = "output");

// The checks before the long work: the output is none of the files the source reads (its folder's
// config, index, shards and tokenizer included) nor another input or output; an output folder
// holds no input and only files nmkit writes; the location takes a temporary (one is made and
// removed: a read-only or missing folder fails now, not after the pruning); and its file system has
// room for the tensors (model_file_bytes).
Status check_model_output(const ModelOutput& output, const ModelSource& source,
                          const std::vector<FileRole>& other_inputs = {},
                          const std::vector<FileRole>& other_outputs = {});

// Writes the tensors by the output's kind: write_model_gguf, write_model_hf or write_model_hf_weights.
Status write_model_output(const ModelOutput& output, const TensorsToWrite& tensors, const ModelSource& source,
                          const std::function<void(size_t i, size_t n, const OutputTensor&)>& on_tensor = {});

}  // namespace nmkit
