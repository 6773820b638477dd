// Qwen3 (llama.cpp's qwen3): llama blocks with an RMSNorm of each q and k head before rope (weights of
// head_dim), no biases, rope NEOX, a head size of its own (head_dim, attention.key_length).
#include "model/family.h"

namespace nmkit::model {
namespace {

Status read_qwen3_gguf(const GgufFile&, LlamaParams&) { return ok_status(); }

Status read_qwen3_hf(const HfConfig& c, LlamaParams&) {
  if (const auto* act = c.find("hidden_act"); act != nullptr && *act != "silu") {
    return Error(c.path() + ": 'hidden_act' is " + shown_json(*act) + ", only \"silu\" is supported");
  }
  auto bias = c.flag("attention_bias", false);
  if (!bias.ok()) return bias.error();
  if (*bias) return Error(c.path() + ": 'attention_bias' is true: Qwen3 biases are not supported");
  auto sliding = c.flag("use_sliding_window", false);
  if (!sliding.ok()) return sliding.error();
  if (*sliding) return Error(c.path() + ": 'use_sliding_window' is true: Qwen3's sliding window is not supported");
  return ok_status();
}

void write_qwen3_gguf(const LlamaParams&, std::vector<GgufKeyValue>&) {}

void write_qwen3_hf(const LlamaParams&, nlohmann::ordered_json& c) {
  c["hidden_act"] = "silu";
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
    .read_gguf = read_qwen3_gguf,
    .read_hf = read_qwen3_hf,
    .write_gguf = write_qwen3_gguf,
    .write_hf = write_qwen3_hf,
};

}  // namespace nmkit::model
