// Qwen2 and Qwen2.5 (llama.cpp's qwen2): llama blocks with biases on q, k and v, rope NEOX (Hugging
// Face q/k rows are not permuted). Qwen2's optional sliding window (use_sliding_window) is refused.
#include "model/family.h"

namespace nmkit::model {
namespace {

Status read_qwen2_hf(const HfConfig& c, LlamaParams&) {
  return refuse_true(c, "use_sliding_window", "Qwen2's sliding window");
}

void write_qwen2_hf(const LlamaParams&, nlohmann::ordered_json& c) { c["use_sliding_window"] = false; }

}  // namespace

const Family kQwen2Family = {
    .name = "qwen2",
    .gguf_arch = "qwen2",
    .hf_model_type = "qwen2",
    .hf_class = "Qwen2ForCausalLM",
    .rope = RopeMode::Neox,
    .qkv_bias = true,
    .vectors = {{"attn_norm.weight", "input_layernorm.weight", VectorSize::Embd, true},
                {"attn_q.bias", "self_attn.q_proj.bias", VectorSize::QRows, false},
                {"attn_k.bias", "self_attn.k_proj.bias", VectorSize::KvRows, false},
                {"attn_v.bias", "self_attn.v_proj.bias", VectorSize::KvRows, false},
                {"ffn_norm.weight", "post_attention_layernorm.weight", VectorSize::Embd, true}},
    .read_hf = read_qwen2_hf,
    .write_hf = write_qwen2_hf,
};

}  // namespace nmkit::model
