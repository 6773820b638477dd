// Qwen3 (llama.cpp's qwen3): llama blocks with an RMSNorm of each q and k head before rope (weights of
// head_dim), no biases, rope NEOX, a head size of its own (head_dim, attention.key_length).
#include "model/family.h"

namespace nmkit::model {
namespace {

Status read_qwen3_hf(const HfConfig& c, LlamaParams&) {
  NMKIT_TRY(refuse_true(c, "attention_bias", "a Qwen3 attention bias"));
  return refuse_true(c, "use_sliding_window", "Qwen3's sliding window");
}

void write_qwen3_hf(const LlamaParams&, nlohmann::ordered_json& c) {
  c["attention_bias"] = false;
  c["use_sliding_window"] = false;
}

}  // namespace

const Family kQwen3Family = {
    .name = "qwen3",
    .gguf_arch = "qwen3",
    .hf_model_type = "qwen3",
    .hf_class = "Qwen3ForCausalLM",
    .rope = RopeMode::Neox,
    .qk_norm = true,
    .vectors = {{"attn_norm.weight", "input_layernorm.weight", VectorSize::Embd, true},
                {"attn_q_norm.weight", "self_attn.q_norm.weight", VectorSize::HeadDim, true},
                {"attn_k_norm.weight", "self_attn.k_norm.weight", VectorSize::HeadDim, true},
                {"ffn_norm.weight", "post_attention_layernorm.weight", VectorSize::Embd, true}},
    .read_hf = read_qwen3_hf,
    .write_hf = write_qwen3_hf,
};

}  // namespace nmkit::model
