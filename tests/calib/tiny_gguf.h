// A tiny llama GGUF written by the library's own GGUF writer for the calibration tests: random f32
// tensors (fixed seed) and a 64-token GPT-2 vocabulary, optionally with its blocks stored backwards.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nmkit/gguf.h"
#include "nmkit/model.h"
#include "nmkit/tensor.h"

namespace nmkit {

inline LlamaParams params() {
  LlamaParams p;
  p.n_vocab = 64;
  p.n_embd = 32;
  p.n_layer = 2;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.n_ff = 44;
  p.n_ctx_train = 64;
  p.rms_eps = 1e-5f;
  p.rope_base = 10000.0f;
  p.tied_output = false;  // lm_head.weight is written (SmolLM2's test covers the tied case)
  return p;
}

inline std::vector<std::pair<std::string, Tensor>> tensors(const LlamaParams& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto random = [&](Shape shape, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
    for (float& x : v) x = d(rng);
    return Tensor::from_f32(v, shape);
  };
  std::vector<std::pair<std::string, Tensor>> t;
  const int64_t d = p.n_embd, hd = p.head_dim();
  t.emplace_back("token_embd.weight", random({p.n_vocab, d}, -1.5f, 1.5f));
  t.emplace_back("output_norm.weight", random({d}, 0.5f, 1.5f));
  t.emplace_back("output.weight", random({p.n_vocab, d}, -0.3f, 0.3f));
  for (int64_t b = 0; b < p.n_layer; ++b) {
    const std::string pre = "blk." + std::to_string(b) + ".";
    const float s = 0.3f;
    t.emplace_back(pre + "attn_norm.weight", random({d}, 0.5f, 1.5f));
    t.emplace_back(pre + "attn_q.weight", random({p.n_head * hd, d}, -s, s));
    t.emplace_back(pre + "attn_k.weight", random({p.n_head_kv * hd, d}, -s, s));
    t.emplace_back(pre + "attn_v.weight", random({p.n_head_kv * hd, d}, -s, s));
    t.emplace_back(pre + "attn_output.weight", random({d, p.n_head * hd}, -s, s));
    t.emplace_back(pre + "ffn_norm.weight", random({d}, 0.5f, 1.5f));
    t.emplace_back(pre + "ffn_gate.weight", random({p.n_ff, d}, -s, s));
    t.emplace_back(pre + "ffn_up.weight", random({p.n_ff, d}, -s, s));
    t.emplace_back(pre + "ffn_down.weight", random({d, p.n_ff}, -s, s));
  }
  return t;
}

inline GgufValue strings(const std::vector<std::string>& items) {
  std::vector<GgufValue> v;
  for (const std::string& s : items) v.push_back(GgufValue::of_string(s));
  return GgufValue::of_array(GgufType::String, std::move(v));
}

// A GGUF with a 64-token GPT-2 vocabulary: the 60 printable bytes '!'..'\\' (their own byte-level
// symbols), "Ġ" (the space byte), the merges "A B" and "1 2" and a control token.
inline void write_tiny_gguf(const std::string& path, const LlamaParams& p, const std::string& tokenizer_model = "gpt2",
                            bool blocks_reversed = false) {
  std::vector<std::string> tokens;
  for (int c = 0x21; c <= 0x5C; ++c) tokens.emplace_back(1, static_cast<char>(c));  // 60 tokens
  tokens.emplace_back("\xC4\xA0");  // GPT-2's symbol for the space byte
  tokens.emplace_back("AB");
  tokens.emplace_back("12");
  tokens.emplace_back("<|endoftext|>");
  std::vector<GgufValue> types;
  for (size_t i = 0; i < tokens.size(); ++i) types.push_back(GgufValue::of_int32(i + 1 == tokens.size() ? 3 : 1));
  auto u32 = [](int64_t v) { return GgufValue::of_uint32(static_cast<uint32_t>(v)); };
  std::vector<GgufKeyValue> kv = {{"general.architecture", GgufValue::of_string("llama")},
                                  {"llama.context_length", u32(p.n_ctx_train)},
                                  {"llama.embedding_length", u32(p.n_embd)},
                                  {"llama.block_count", u32(p.n_layer)},
                                  {"llama.feed_forward_length", u32(p.n_ff)},
                                  {"llama.attention.head_count", u32(p.n_head)},
                                  {"llama.attention.head_count_kv", u32(p.n_head_kv)},
                                  {"llama.attention.layer_norm_rms_epsilon", GgufValue::of_float32(p.rms_eps)},
                                  {"llama.rope.freq_base", GgufValue::of_float32(p.rope_base)},
                                  {"tokenizer.ggml.model", GgufValue::of_string(tokenizer_model)},
                                  {"tokenizer.ggml.pre", GgufValue::of_string("smollm")},
                                  {"tokenizer.ggml.tokens", strings(tokens)},
                                  {"tokenizer.ggml.token_type", GgufValue::of_array(GgufType::I32, types)},
                                  {"tokenizer.ggml.merges", strings({"A B", "1 2"})},
                                  {"tokenizer.ggml.eos_token_id", u32(63)},
                                  {"tokenizer.ggml.add_bos_token", GgufValue::of_bool(false)}};
  std::vector<OutputTensor> out;
  auto all = tensors(p, 5);
  if (blocks_reversed) {  // the last block's tensors first (a file order whose blocks come backwards)
    std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
      const auto block = [](const std::string& n) { return n.starts_with("blk.") ? -std::stoll(n.substr(4)) : INT64_MIN; };
      return block(a.first) < block(b.first);
    });
  }
  for (auto& [name, t] : all) out.push_back(OutputTensor::owning(name, std::move(t)));
  ASSERT_TRUE(write_gguf(path, kv, out).ok());
}

}  // namespace nmkit
