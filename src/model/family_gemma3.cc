// Gemma 3 (llama.cpp's gemma3, docs/design.md 11.8): embeddings x sqrt(n_embd); an RMSNorm before and
// after attention and feed-forward; q/k RMSNorm per head; GELU-tanh gate; rope NEOX; local layers
// with a sliding window and their own rope base (unscaled), a global layer every few; a query scale
// from the metadata; norm weights stored as 1 + w in GGUF (llama.cpp's converter adds the 1 that
// Gemma's Hugging Face RMSNorm adds at run time).
#include <cmath>

#include "model/family.h"

namespace nmkit::model {
namespace {

constexpr int64_t kDefaultPeriod = 6;  // llama.cpp's gemma3 default: 5 local layers, then 1 global

Status read_gemma3_gguf(const GgufFile& file, LlamaParams& p) {
  const std::string k = "gemma3.";
  auto window = optional_uint(file, k + "attention.sliding_window");
  if (!window.ok()) return window.error();
  if (*window && **window > 0) {
    p.sliding_window = static_cast<int64_t>(std::min<uint64_t>(**window, uint64_t{1} << 40));
    const std::string pattern_key = k + "attention.sliding_window_pattern";
    const GgufValue* pattern = file.find_key(pattern_key);
    if (pattern != nullptr && pattern->type == GgufType::Array) {
      // One flag per layer (llama.cpp's get_arr into is_swa_impl): true = local.
      if (pattern->elements.size() != static_cast<size_t>(p.n_layer)) {
        return Error(file.path() + ": metadata key '" + pattern_key + "' has " +
                     std::to_string(pattern->elements.size()) + " entries for " + std::to_string(p.n_layer) + " layers");
      }
      p.local_layers.clear();
      for (const GgufValue& e : pattern->elements) p.local_layers.push_back(e.integer != 0);
    } else {
      auto period = optional_uint(file, pattern_key);
      if (!period.ok()) return period.error();
      const uint64_t n = period->value_or(kDefaultPeriod);
      if (n > static_cast<uint64_t>(p.n_layer) + 1) {
        return Error(file.path() + ": metadata key '" + pattern_key + "' is " + std::to_string(n) + ", more than " +
                     std::to_string(p.n_layer) + " layers");
      }
      p.local_layers = periodic_local_layers(p.n_layer, static_cast<int64_t>(n));
    }
    auto base = optional_float(file, k + "rope.freq_base_swa");
    if (!base.ok()) return base.error();
    p.rope_base_local = static_cast<float>(base->value_or(10000.0));
  }
  auto cap = optional_float(file, k + "final_logit_softcapping");
  if (!cap.ok()) return cap.error();
  if (*cap && **cap != 0.0) {
    return Error(file.path() + ": metadata key '" + k + "final_logit_softcapping' is " + std::to_string(**cap) +
                 ": logit soft-capping is not supported");
  }
  // llama.cpp's gemma3 (after gemma_pytorch's config): 1/sqrt(head size), except the 62-layer 27B model,
  // whose query_pre_attn_scalar is n_embd / n_head.
  const float per = p.n_layer == 62 ? static_cast<float>(p.n_embd / p.n_head) : static_cast<float>(p.head_dim());
  p.query_scale = 1.0f / std::sqrt(per);
  return ok_status();
}

// transformers' Gemma3TextConfig.
Status read_gemma3_hf(const HfConfig& c, LlamaParams& p) {
  for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    if (const auto* cap = c.find(key)) {
      return Error(c.path() + ": '" + key + "' is " + shown_json(*cap) + ": soft-capping is not supported");
    }
  }
  NMKIT_TRY(refuse_true(c, "attention_bias", "a Gemma 3 attention bias"));
  auto scalar = c.number("query_pre_attn_scalar", static_cast<double>(p.head_dim()));
  if (!scalar.ok()) return scalar.error();
  if (!(*scalar > 0)) return Error(c.path() + ": 'query_pre_attn_scalar' is " + std::to_string(*scalar) + ", not positive");
  p.query_scale = static_cast<float>(1.0 / std::sqrt(*scalar));
  auto window = c.count("sliding_window", int64_t{0});
  if (!window.ok()) return window.error();
  if (*window > 0) {
    p.sliding_window = *window;
    auto types = c.texts("layer_types");
    if (!types.ok()) return types.error();
    if (!types->empty()) {
      if (types->size() != static_cast<size_t>(p.n_layer)) {
        return Error(c.path() + ": 'layer_types' has " + std::to_string(types->size()) + " entries for " +
                     std::to_string(p.n_layer) + " layers");
      }
      p.local_layers.clear();
      for (const std::string& t : *types) {
        if (t != "sliding_attention" && t != "full_attention") {
          return Error(c.path() + ": 'layer_types' holds '" + t + "', not sliding_attention or full_attention");
        }
        p.local_layers.push_back(t == "sliding_attention");
      }
    } else {
      auto period = c.count("sliding_window_pattern", kDefaultPeriod);
      if (!period.ok()) return period.error();
      p.local_layers = periodic_local_layers(p.n_layer, *period);
    }
    auto base = c.number("rope_local_base_freq", 10000.0);
    if (!base.ok()) return base.error();
    p.rope_base_local = static_cast<float>(*base);
  }
  return ok_status();
}

// The period of p's local layers when they follow llama.cpp's pattern, else 0 (written as one flag a layer).
int64_t local_period(const LlamaParams& p) {
  for (int64_t n = 0; n <= p.n_layer + 1; ++n) {
    if (periodic_local_layers(p.n_layer, n) == p.local_layers) return n;
  }
  return -1;
}

void write_gemma3_gguf(const LlamaParams& p, std::vector<GgufKeyValue>& keys) {
  if (p.sliding_window <= 0) return;
  keys.push_back({"gemma3.attention.sliding_window", GgufValue::of_uint32(static_cast<uint32_t>(p.sliding_window))});
  if (const int64_t n = local_period(p); n >= 0) {
    keys.push_back({"gemma3.attention.sliding_window_pattern", GgufValue::of_uint32(static_cast<uint32_t>(n))});
  } else {
    std::vector<GgufValue> flags;
    for (uint8_t local : p.local_layers) flags.push_back(GgufValue::of_bool(local != 0));
    keys.push_back({"gemma3.attention.sliding_window_pattern", GgufValue::of_array(GgufType::Bool, std::move(flags))});
  }
  keys.push_back({"gemma3.rope.freq_base_swa", GgufValue::of_float32(p.rope_base_local)});
}

void write_gemma3_hf(const LlamaParams& p, nlohmann::ordered_json& c) {
  c["hidden_activation"] = "gelu_pytorch_tanh";
  c["query_pre_attn_scalar"] = 1.0 / (static_cast<double>(p.query_scale) * p.query_scale);
  c["attention_bias"] = false;
  c["final_logit_softcapping"] = nullptr;
  c["attn_logit_softcapping"] = nullptr;
  if (p.sliding_window > 0) {
    c["sliding_window"] = p.sliding_window;
    nlohmann::ordered_json types = nlohmann::ordered_json::array();
    for (int64_t b = 0; b < p.n_layer; ++b) types.push_back(p.is_local(b) ? "sliding_attention" : "full_attention");
    c["layer_types"] = types;
    c["rope_local_base_freq"] = p.rope_base_local;
  }
}

}  // namespace

const Family kGemma3Family = {
    .name = "gemma3",
    .gguf_arch = "gemma3",
    .hf_model_type = "gemma3_text",
    .hf_class = "Gemma3ForCausalLM",
    .rope = RopeMode::Neox,
    .activation = Activation::GeluTanh,
    .embed_scale = true,
    .qk_norm = true,
    .post_norms = true,
    .hf_norm_plus_one = true,
    .hf_tied_default = true,
    .hf_activation = "gelu_pytorch_tanh",
    .vectors = {{"attn_norm.weight", "input_layernorm.weight", VectorSize::Embd, true},
                {"attn_q_norm.weight", "self_attn.q_norm.weight", VectorSize::HeadDim, true},
                {"attn_k_norm.weight", "self_attn.k_norm.weight", VectorSize::HeadDim, true},
                {"post_attention_norm.weight", "post_attention_layernorm.weight", VectorSize::Embd, true},
                {"ffn_norm.weight", "pre_feedforward_layernorm.weight", VectorSize::Embd, true},
                {"post_ffw_norm.weight", "post_feedforward_layernorm.weight", VectorSize::Embd, true}},
    .read_gguf = read_gemma3_gguf,
    .read_hf = read_gemma3_hf,
    .write_gguf = write_gemma3_gguf,
    .write_hf = write_gemma3_hf,
};

}  // namespace nmkit::model
