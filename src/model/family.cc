// Looking families up, and what every family's description shares (family.h).
#include "model/family.h"

#include <array>

namespace nmkit::model {
namespace {

const std::array<const Family*, 5>& all_families() {
  static const std::array<const Family*, 5> all = {&kLlamaFamily, &kMistralFamily, &kQwen2Family, &kQwen3Family,
                                                   &kGemma3Family};
  return all;
}

}  // namespace

bool Family::has(std::string_view vector_gguf) const {
  for (const BlockVector& v : vectors) {
    if (vector_gguf == v.gguf) return true;
  }
  return false;
}

const Family* find_family(std::string_view name) {
  for (const Family* f : all_families()) {
    if (name == f->name) return f;
  }
  return nullptr;
}

const Family* find_gguf_family(std::string_view gguf_arch) {
  for (const Family* f : all_families()) {
    if (gguf_arch == f->gguf_arch && std::string_view(f->name) == f->gguf_arch) return f;
  }
  return nullptr;
}

const Family* find_hf_family(std::string_view model_type) {
  for (const Family* f : all_families()) {
    if (model_type == f->hf_model_type) return f;
  }
  return nullptr;
}

const Family& family_of(const LlamaParams& p) {
  const Family* f = find_family(p.arch);
  NMKIT_ASSERT(f != nullptr);
  return *f;
}

int64_t vector_size(VectorSize size, const LlamaParams& p) {
  switch (size) {
    case VectorSize::Embd: return p.n_embd;
    case VectorSize::HeadDim: return p.head_dim();
    case VectorSize::QRows: return p.n_head * p.head_dim();
    case VectorSize::KvRows: return p.n_head_kv * p.head_dim();
  }
  return 0;
}

std::vector<std::string> gguf_architectures() {
  std::vector<std::string> out;
  for (const Family* f : all_families()) {
    if (std::string_view(f->name) == f->gguf_arch) out.emplace_back(f->gguf_arch);
  }
  return out;
}

std::vector<std::string> hf_model_types() {
  std::vector<std::string> out;
  for (const Family* f : all_families()) out.emplace_back(f->hf_model_type);
  return out;
}

Result<std::optional<double>> optional_float(const GgufFile& file, const std::string& key) {
  if (file.find_key(key) == nullptr) return std::optional<double>();
  auto v = file.get_float(key);
  if (!v.ok()) return v.error();
  return std::optional<double>(*v);
}

Result<std::optional<uint64_t>> optional_uint(const GgufFile& file, const std::string& key) {
  if (file.find_key(key) == nullptr) return std::optional<uint64_t>();
  auto v = file.get_uint(key);
  if (!v.ok()) return v.error();
  return std::optional<uint64_t>(*v);
}

Status refuse_true(const HfConfig& config, const char* key, const std::string& what) {
  auto value = config.flag(key, false);
  if (!value.ok()) return value.error();
  if (*value) return Error(config.path() + ": '" + key + "' is true: " + what + " is not supported");
  return ok_status();
}

std::vector<uint8_t> periodic_local_layers(int64_t n_layer, int64_t period) {
  std::vector<uint8_t> local(static_cast<size_t>(n_layer));
  for (int64_t b = 0; b < n_layer; ++b) local[static_cast<size_t>(b)] = period == 0 || b % period < period - 1;
  return local;
}

}  // namespace nmkit::model

namespace nmkit::model {
std::string family_list() {
  std::string list;
  for (const Family* f : all_families()) list += (list.empty() ? "" : ", ") + std::string(f->name);
  return list;
}
}  // namespace nmkit::model

namespace nmkit::model {

std::vector<ModelTensorName> model_tensor_names(const LlamaParams& p) {
  const Family& family = family_of(p);
  const int64_t d = p.n_embd, q_rows = p.n_head * p.head_dim(), kv_rows = p.n_head_kv * p.head_dim();
  std::vector<ModelTensorName> out;
  out.push_back({"token_embd.weight", "model.embed_tokens.weight", {p.n_vocab, d}});
  out.push_back({"output_norm.weight", "model.norm.weight", {d}, 0, family.hf_norm_plus_one});
  if (!p.tied_output) out.push_back({"output.weight", "lm_head.weight", {p.n_vocab, d}});
  const bool permute = family.hf_permutes_qk();
  for (int64_t b = 0; b < p.n_layer; ++b) {
    const std::string blk = "blk." + std::to_string(b) + ".", layer = "model.layers." + std::to_string(b) + ".";
    auto linear = [&](const char* gguf, const char* hf, Shape shape, int64_t heads) {
      out.push_back({blk + gguf + ".weight", layer + hf + ".weight", std::move(shape), permute ? heads : 0, false});
    };
    bool ffn = false;
    for (const BlockVector& v : family.vectors) {
      if (!ffn && std::string_view(v.gguf) == "ffn_norm.weight") {
        linear("attn_q", "self_attn.q_proj", {q_rows, d}, p.n_head);
        linear("attn_k", "self_attn.k_proj", {kv_rows, d}, p.n_head_kv);
        linear("attn_v", "self_attn.v_proj", {kv_rows, d}, 0);
        linear("attn_output", "self_attn.o_proj", {d, q_rows}, 0);
        ffn = true;
      }
      out.push_back({blk + v.gguf, layer + v.hf, {vector_size(v.size, p)}, 0, v.is_norm && family.hf_norm_plus_one});
    }
    linear("ffn_gate", "mlp.gate_proj", {p.n_ff, d}, 0);
    linear("ffn_up", "mlp.up_proj", {p.n_ff, d}, 0);
    linear("ffn_down", "mlp.down_proj", {d, p.n_ff}, 0);
  }
  return out;
}

}  // namespace nmkit::model
