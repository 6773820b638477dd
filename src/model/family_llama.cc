// The llama family (docs/design.md 11.2): pre-norm blocks, rope NORM, SwiGLU, no biases; Llama 3.x's
// rope scaling comes as the rope_freqs.weight factors (GGUF) or config.json's rope_scaling "llama3"
// (both read by every family's loader). Mistral is llama with its own Hugging Face model type and an
// optional sliding window over every layer; llama.cpp's converter writes it as a llama GGUF (which
// has no window: llama.cpp runs Mistral's files without one).
#include <cmath>

#include "model/family.h"

namespace nmkit::model {

// LlamaModel.generate_extra_tensors: wavelength below original_context / high -> 1, above
// original_context / low -> factor, else 1 / ((1 - s) / factor + s) with s = (original_context /
// wavelength - low) / (high - low).
double llama3_rope_factor(const LlamaParams& p, int64_t i, double factor, double low, double high,
                          double original_context) {
  const int64_t dim = p.head_dim();
  const float freq = 1.0f / std::pow(p.rope_base, static_cast<float>(2 * i) / static_cast<float>(dim));
  const double wavelen = 2 * M_PI / static_cast<double>(freq);
  if (wavelen < original_context / high) return 1;
  if (wavelen > original_context / low) return factor;
  const double smooth = (original_context / wavelen - low) / (high - low);
  return 1 / ((1 - smooth) / factor + smooth);
}

namespace {

const std::vector<BlockVector> kLlamaVectors = {
    {"attn_norm.weight", "input_layernorm.weight", VectorSize::Embd, true},
    {"ffn_norm.weight", "post_attention_layernorm.weight", VectorSize::Embd, true},
};

// transformers' LlamaConfig: no biases.
Status read_llama_hf(const HfConfig& c, LlamaParams&) {
  NMKIT_TRY(refuse_true(c, "attention_bias", "a llama attention bias"));
  return refuse_true(c, "mlp_bias", "a llama MLP bias");
}

// MistralConfig: llama's, and sliding_window (null: none) over every layer.
Status read_mistral_hf(const HfConfig& c, LlamaParams& p) {
  NMKIT_TRY(read_llama_hf(c, p));
  auto window = c.count("sliding_window", int64_t{0});
  if (!window.ok()) return window.error();
  if (*window > 0 && *window < p.n_ctx_train) {
    p.sliding_window = *window;
    p.local_layers = periodic_local_layers(p.n_layer, 0);
  }
  return ok_status();
}

void write_llama_hf(const LlamaParams&, nlohmann::ordered_json& c) {
  c["attention_bias"] = false;
  c["mlp_bias"] = false;
}

void write_mistral_hf(const LlamaParams& p, nlohmann::ordered_json& c) {
  c["sliding_window"] = p.sliding_window > 0 ? nlohmann::ordered_json(p.sliding_window) : nlohmann::ordered_json();
}

}  // namespace

const Family kLlamaFamily = {
    .name = "llama",
    .gguf_arch = "llama",
    .hf_model_type = "llama",
    .hf_class = "LlamaForCausalLM",
    .vectors = kLlamaVectors,
    .read_hf = read_llama_hf,
    .write_hf = write_llama_hf,
};

const Family kMistralFamily = {
    .name = "mistral",
    .gguf_arch = "llama",
    .hf_model_type = "mistral",
    .hf_class = "MistralForCausalLM",
    .vectors = kLlamaVectors,
    .read_hf = read_mistral_hf,
    .write_hf = write_mistral_hf,
};

}  // namespace nmkit::model
