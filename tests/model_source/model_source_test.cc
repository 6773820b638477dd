// ModelSource on tiny generated models: GGUF and Hugging Face folders (single file and sharded)
// give the same hyper-parameters, names and tensors; the q/k permutation matches a hand-worked
// example; and bad models (unsupported architecture, missing keys, shapes that disagree with the
// metadata, missing or extra tensors, unsupported dtypes, rope scaling) fail with one line naming
// the file and the value (docs/design.md section 11.1, issue 10 "Bad input").
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nmkit/gguf.h"
#include "nmkit/model_source.h"
#include "nmkit/safetensors.h"
#include "tests/io/io_test_util.h"

namespace nmkit {
namespace {

// vocab 10, embd 8, 1 block, 2 heads of 4 (1 kv head), ffn 12.
constexpr int64_t kVocab = 10, kEmbd = 8, kHeads = 2, kKvHeads = 1, kHd = 4, kFf = 12;

// Tensor `name`'s value i, distinct for every tensor and element.
float value_of(const std::string& name, int64_t i) {
  uint32_t h = 2166136261u;
  for (const char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return static_cast<float>(h % 1000) + static_cast<float>(i) * 0.001f;
}

Tensor filled(const std::string& name, const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = value_of(name, static_cast<int64_t>(i));
  return Tensor::from_f32(v, shape);
}

std::map<std::string, Shape> gguf_shapes(bool tied) {
  std::map<std::string, Shape> s = {
      {"token_embd.weight", {kVocab, kEmbd}},         {"output_norm.weight", {kEmbd}},
      {"blk.0.attn_norm.weight", {kEmbd}},            {"blk.0.attn_q.weight", {kHeads * kHd, kEmbd}},
      {"blk.0.attn_k.weight", {kKvHeads * kHd, kEmbd}}, {"blk.0.attn_v.weight", {kKvHeads * kHd, kEmbd}},
      {"blk.0.attn_output.weight", {kEmbd, kHeads * kHd}}, {"blk.0.ffn_norm.weight", {kEmbd}},
      {"blk.0.ffn_gate.weight", {kFf, kEmbd}},        {"blk.0.ffn_up.weight", {kFf, kEmbd}},
      {"blk.0.ffn_down.weight", {kEmbd, kFf}}};
  if (!tied) s["output.weight"] = {kVocab, kEmbd};
  return s;
}

std::vector<GgufKeyValue> llama_keys(const std::string& arch = "llama") {
  return {{"general.architecture", GgufValue::of_string(arch)},
          {"llama.vocab_size", GgufValue::of_uint32(kVocab)},
          {"llama.embedding_length", GgufValue::of_uint32(kEmbd)},
          {"llama.block_count", GgufValue::of_uint32(1)},
          {"llama.attention.head_count", GgufValue::of_uint32(kHeads)},
          {"llama.attention.head_count_kv", GgufValue::of_uint32(kKvHeads)},
          {"llama.feed_forward_length", GgufValue::of_uint32(kFf)},
          {"llama.context_length", GgufValue::of_uint32(64)},
          {"llama.attention.layer_norm_rms_epsilon", GgufValue::of_float32(1e-5f)},
          {"llama.rope.freq_base", GgufValue::of_float32(50000.0f)}};
}

nlohmann::json hf_config() {
  return {{"model_type", "llama"},       {"vocab_size", kVocab},       {"hidden_size", kEmbd},
          {"num_hidden_layers", 1},      {"num_attention_heads", kHeads}, {"num_key_value_heads", kKvHeads},
          {"intermediate_size", kFf},    {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-5},
          {"rope_theta", 50000.0},       {"tie_word_embeddings", false}, {"rope_scaling", nullptr}};
}

const std::map<std::string, std::string>& hf_names() {
  static const std::map<std::string, std::string> m = {
      {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
      {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
      {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
      {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"},
      {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight"},
      {"blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight"},
      {"blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight"},
      {"blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight"},
      {"blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight"},
      {"blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"}};
  return m;
}

// HF stores q/k with each head's rows in rotate-halves order: GGUF row 2i + s of a head of 4 rows
// is HF row s*2 + i, so GGUF rows (0, 1, 2, 3) of a head come from HF rows (0, 2, 1, 3).
Tensor to_hf_order(const Tensor& gguf_rows, int64_t heads) {
  Tensor out = Tensor::empty(DType::F32, gguf_rows.shape());
  const int64_t K = gguf_rows.cols();
  const int hf_row_of[4] = {0, 2, 1, 3};
  for (int64_t h = 0; h < heads; ++h) {
    for (int r = 0; r < 4; ++r) {
      std::memcpy(out.as<float>() + (h * 4 + hf_row_of[r]) * K, gguf_rows.as<float>() + (h * 4 + r) * K,
                  static_cast<size_t>(K) * 4);
    }
  }
  return out;
}

class ModelSourceTest : public ::testing::Test {
 protected:
  std::string write_gguf_model(const std::string& file, bool tied, std::vector<GgufKeyValue> keys = llama_keys(),
                               std::map<std::string, Shape> shapes = gguf_shapes(false)) {
    if (tied) shapes.erase("output.weight");
    std::vector<OutputTensor> tensors;
    for (const auto& [name, shape] : shapes) tensors.push_back(OutputTensor::owning(name, filled(name, shape)));
    const std::string path = dir_.file(file);
    EXPECT_TRUE(write_gguf(path, keys, tensors).ok());
    return path;
  }

  // A Hugging Face folder with the same tensors as write_gguf_model (q/k in HF order), in `shards`
  // safetensors files (1: model.safetensors without an index).
  std::string write_hf_model(const std::string& folder, int shards, nlohmann::json config = hf_config(),
                             std::map<std::string, Shape> shapes = gguf_shapes(false), DType dtype = DType::F32) {
    const std::string dir = dir_.file(folder);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json") << config.dump();
    std::vector<std::vector<OutputTensor>> parts(static_cast<size_t>(shards));
    nlohmann::json weight_map = nlohmann::json::object();
    size_t i = 0;
    for (const auto& [name, shape] : shapes) {
      Tensor t = filled(name, shape);
      if (name == "blk.0.attn_q.weight") t = to_hf_order(t, kHeads);
      if (name == "blk.0.attn_k.weight") t = to_hf_order(t, kKvHeads);
      if (dtype != DType::F32) t = Tensor::from_f32(t.to_f32(), t.shape(), dtype);
      const auto it = hf_names().find(name);
      const std::string hf = it == hf_names().end() ? name : it->second;
      const size_t shard = i++ % parts.size();
      parts[shard].push_back(OutputTensor::owning(hf, std::move(t)));
      weight_map[hf] = "model-0000" + std::to_string(shard + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    }
    if (shards == 1) {
      EXPECT_TRUE(write_safetensors(dir + "/model.safetensors", parts[0]).ok());
    } else {
      for (size_t s = 0; s < parts.size(); ++s) {
        const std::string file = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
        EXPECT_TRUE(write_safetensors(dir + "/" + file, parts[s]).ok());
      }
      std::ofstream(dir + "/model.safetensors.index.json") << nlohmann::json{{"weight_map", weight_map}}.dump();
    }
    return dir;
  }

  // Opens `path`, which must fail with one line mentioning every piece.
  void expect_error(const std::string& path, std::initializer_list<std::string> pieces) {
    auto source = ModelSource::open(path);
    ASSERT_FALSE(source.ok()) << "opened " << path;
    const std::string& message = source.error().message();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const std::string& piece : pieces) EXPECT_NE(message.find(piece), std::string::npos) << piece << " missing in: " << message;
  }

  test::TempDir dir_;
};

void expect_model_tensors(const ModelSource& source, bool tied) {
  const auto shapes = gguf_shapes(tied);
  ASSERT_EQ(source.tensor_names().size(), shapes.size());
  EXPECT_EQ(source.tensor_names()[0], "token_embd.weight");
  EXPECT_EQ(source.tensor_names()[1], "output_norm.weight");
  for (const auto& [name, shape] : shapes) {
    auto t = source.load_f32(name);
    ASSERT_TRUE(t.ok()) << t.error().message();
    EXPECT_EQ(t->dtype(), DType::F32);
    ASSERT_EQ(t->shape(), shape) << name;
    const Tensor want = filled(name, shape);
    EXPECT_EQ(t->to_f32(), want.to_f32()) << name;
  }
}

TEST_F(ModelSourceTest, GgufModel) {
  for (const bool tied : {false, true}) {
    auto source = ModelSource::open(write_gguf_model(tied ? "tied.gguf" : "untied.gguf", tied));
    ASSERT_TRUE(source.ok()) << source.error().message();
    EXPECT_EQ(source->kind(), ModelSource::Kind::Gguf);
    EXPECT_EQ(source->architecture(), "llama");
    const LlamaParams& p = source->params();
    EXPECT_EQ(p.n_vocab, kVocab);
    EXPECT_EQ(p.n_embd, kEmbd);
    EXPECT_EQ(p.n_layer, 1);
    EXPECT_EQ(p.n_head, kHeads);
    EXPECT_EQ(p.n_head_kv, kKvHeads);
    EXPECT_EQ(p.n_ff, kFf);
    EXPECT_EQ(p.n_ctx_train, 64);
    EXPECT_EQ(p.rms_eps, 1e-5f);
    EXPECT_EQ(p.rope_base, 50000.0f);
    EXPECT_EQ(p.tied_output, tied);
    ASSERT_NE(source->gguf(), nullptr);
    EXPECT_EQ(source->tokenizer_json(), "");
    expect_model_tensors(*source, tied);
    EXPECT_FALSE(source->load_f32("blk.7.attn_q.weight").ok());
    auto via_loader = source->loader()("blk.0.ffn_up.weight");
    ASSERT_TRUE(via_loader.ok());
  }
}

TEST_F(ModelSourceTest, HuggingFaceFolderSingleAndSharded) {
  for (const int shards : {1, 3}) {
    const std::string dir = write_hf_model("hf" + std::to_string(shards), shards);
    std::ofstream(dir + "/tokenizer.json") << "{}";
    auto source = ModelSource::open(dir);
    ASSERT_TRUE(source.ok()) << source.error().message();
    EXPECT_EQ(source->kind(), ModelSource::Kind::HuggingFace);
    EXPECT_EQ(source->gguf(), nullptr);
    EXPECT_EQ(source->tokenizer_json(), dir + "/tokenizer.json");
    const LlamaParams& p = source->params();
    EXPECT_EQ(p.n_head_kv, kKvHeads);
    EXPECT_EQ(p.rope_base, 50000.0f);
    EXPECT_FALSE(p.tied_output);
    expect_model_tensors(*source, false);  // q/k back in GGUF order: identical to the GGUF model's
  }
}

TEST_F(ModelSourceTest, HuggingFaceTiedAndHalfPrecision) {
  nlohmann::json config = hf_config();
  config["tie_word_embeddings"] = true;
  config.erase("rope_theta");
  auto shapes = gguf_shapes(false);  // lm_head stored too: ignored when tied
  const std::string dir = write_hf_model("hf_bf16", 1, config, shapes, DType::BF16);
  auto source = ModelSource::open(dir);
  ASSERT_TRUE(source.ok()) << source.error().message();
  EXPECT_TRUE(source->params().tied_output);
  EXPECT_EQ(source->params().rope_base, 10000.0f);
  EXPECT_FALSE(source->has_tensor("output.weight"));
  auto q = source->load_f32("blk.0.attn_q.weight");
  ASSERT_TRUE(q.ok());
  const Tensor want = filled("blk.0.attn_q.weight", {kHeads * kHd, kEmbd});
  for (int64_t i = 0; i < want.numel(); ++i) {
    EXPECT_EQ(q->as<float>()[i], bf16_to_f32(f32_to_bf16(want.as<float>()[i]))) << i;
  }
}

TEST_F(ModelSourceTest, UnsupportedArchitectureIsNamed) {
  // An architecture no family describes (docs/design.md 11.8), named with the list of those that run.
  expect_error(write_gguf_model("phi.gguf", true, llama_keys("phi3")),
               {"phi.gguf", "architecture 'phi3' is not supported", "supported: ", "llama", "gemma3"});
  nlohmann::json config = hf_config();
  config["model_type"] = "phi3";
  expect_error(write_hf_model("phi", 1, config), {"config.json", "'phi3' is not supported", "supported: ", "llama"});
}

TEST_F(ModelSourceTest, MissingMetadata) {
  auto keys = llama_keys();
  keys.erase(keys.begin() + 3);  // llama.block_count
  expect_error(write_gguf_model("nokey.gguf", true, keys), {"nokey.gguf", "'llama.block_count'"});
  keys = llama_keys();
  keys[2].value = GgufValue::of_string("eight");  // llama.embedding_length
  expect_error(write_gguf_model("string.gguf", true, keys), {"string.gguf", "'llama.embedding_length'", "string"});
  nlohmann::json config = hf_config();
  config.erase("hidden_size");
  expect_error(write_hf_model("nohidden", 1, config), {"config.json", "'hidden_size'"});
  config = hf_config();
  config["num_attention_heads"] = 3;  // 8 is not a multiple of 3
  expect_error(write_hf_model("heads", 1, config), {"config.json", "n_embd"});
  expect_error(dir_.path(), {dir_.path(), "no config.json"});
  std::ofstream(dir_.file("notes.txt")) << "hello";
  expect_error(dir_.file("notes.txt"), {"notes.txt", "not a GGUF file"});
}

TEST_F(ModelSourceTest, ShapesThatDisagreeWithTheMetadata) {
  auto shapes = gguf_shapes(false);
  shapes["blk.0.ffn_up.weight"] = {kFf + 1, kEmbd};
  expect_error(write_gguf_model("shape.gguf", false, llama_keys(), shapes),
               {"shape.gguf", "'blk.0.ffn_up.weight'", "[13, 8]", "[12, 8]"});
  auto keys = llama_keys();
  keys[1].value = GgufValue::of_uint32(11);  // vocab_size disagrees with token_embd's 10 rows
  expect_error(write_gguf_model("vocab.gguf", false, keys), {"vocab.gguf", "'token_embd.weight'", "[10, 8]", "[11, 8]"});
  shapes = gguf_shapes(false);
  shapes["blk.0.attn_k.weight"] = {kHd * 2, kEmbd};
  expect_error(write_hf_model("hfshape", 2, hf_config(), shapes), {"k_proj", "[8, 8]", "[4, 8]"});
}

TEST_F(ModelSourceTest, MissingAndExtraTensors) {
  auto shapes = gguf_shapes(false);
  shapes.erase("blk.0.ffn_gate.weight");
  expect_error(write_gguf_model("missing.gguf", false, llama_keys(), shapes), {"missing.gguf", "'blk.0.ffn_gate.weight'", "missing"});
  expect_error(write_hf_model("hfmissing", 1, hf_config(), shapes), {"hfmissing", "mlp.gate_proj", "missing"});
  shapes = gguf_shapes(false);
  shapes["blk.0.attn_extra.weight"] = {kEmbd, kEmbd};
  expect_error(write_gguf_model("extra.gguf", false, llama_keys(), shapes), {"extra.gguf", "'blk.0.attn_extra.weight'"});
  shapes = gguf_shapes(false);
  shapes["rope_freqs.weight"] = {3};  // llama3's factors are one per rope pair: head size / 2
  expect_error(write_gguf_model("freqs.gguf", false, llama_keys(), shapes), {"freqs.gguf", "'rope_freqs.weight'", "[3]"});
  shapes = gguf_shapes(false);
  shapes["model.layers.1.mlp.up_proj.weight"] = {kFf, kEmbd};  // a second block config.json does not have
  expect_error(write_hf_model("hfextra", 1, hf_config(), shapes), {"model.layers.1.mlp.up_proj.weight"});
}

TEST_F(ModelSourceTest, UnsupportedDtypesAndFeatures) {
  const std::string dir = write_hf_model("hfint", 1, hf_config(), gguf_shapes(false));
  // Replace the folder's file by one whose norm is I32.
  std::vector<OutputTensor> tensors;
  auto file = SafetensorsFile::open(dir + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  std::vector<Tensor> copies;
  for (const TensorInfo& t : file->tensors()) {
    if (t.name == "model.norm.weight") {
      tensors.push_back(OutputTensor::owning(t.name, Tensor::zeros(DType::I32, t.shape)));
    } else {
      tensors.push_back(OutputTensor::owning(t.name, Tensor::copy_of(file->view(t))));
    }
  }
  ASSERT_TRUE(write_safetensors(dir + "/model2.safetensors", tensors).ok());
  std::filesystem::rename(dir + "/model2.safetensors", dir + "/model.safetensors");
  expect_error(dir, {"model.safetensors", "'model.norm.weight'", "I32"});

  nlohmann::json config = hf_config();
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 8.0}};
  expect_error(write_hf_model("scaled", 1, config), {"config.json", "rope_scaling", "not supported"});
  auto keys = llama_keys();
  keys.push_back({"llama.rope.scaling.type", GgufValue::of_string("yarn")});
  expect_error(write_gguf_model("yarn.gguf", true, keys), {"yarn.gguf", "'yarn'", "not supported"});
}

}  // namespace
}  // namespace nmkit
