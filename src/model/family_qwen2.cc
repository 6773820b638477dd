// Qwen2 and Qwen2.5 (llama.cpp's qwen2): llama blocks with biases on q, k and v, rope NEOX (Hugging
// Face q/k rows are not permuted). Qwen2's optional sliding window (use_sliding_window) is refused.
#include "model/family.h"

namespace nmkit::model {
namespace {

Status read_qwen2_gguf(const GgufFile&, LlamaParams&) { return ok_status(); }

Status read_qwen2_hf(const HfConfig& c, LlamaParams&) {
  if (const auto* act = c.find("hidden_act"); act != nullptr && *act != "silu") {
    return Error(c.path() + ": 'hidden_act' is " + shown_json(*act) + ", only \"silu\" is supported");
  }
  auto sliding = c.flag("use_sliding_window", false);
  if (!sliding.ok()) return sliding.error();
  if (*sliding) return Error(c.path() + ": 'use_sliding_window' is true: Qwen2's sliding window is not supported");
  return ok_status();
}

void write_qwen2_gguf(const LlamaParams&, std::vector<GgufKeyValue>&) {}

void write_qwen2_hf(const LlamaParams&, nlohmann::ordered_json& c) {
  c["hidden_act"] = "silu";
  c["use_sliding_window"] = false;
}

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
    .read_gguf = read_qwen2_gguf,
    .read_hf = read_qwen2_hf,
    .write_gguf = write_qwen2_gguf,
    .write_hf = write_qwen2_hf,
};

}  // namespace nmkit::model
