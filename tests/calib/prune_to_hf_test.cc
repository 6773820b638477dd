// A tiny generated llama GGUF, pruned by SparseGPT, saved as a Hugging Face folder (write_model_hf)
// and loaded back through ModelSource: the logits equal, bit for bit, those of the pruned model in
// memory (so names, q/k row order and every value survive the round trip: the writer's permutation
// is the exact inverse of the loader's, which tests/model_source/hf_equivalence.py checks against
// convert_hf_to_gguf.py's). The written tokenizer gives the GGUF tokenizer's ids. Also: a folder
// holding a file nmkit did not write is refused and left as it was, an nmkit folder is replaced,
// a failure mid-write or an unsupported tokenizer writes nothing (an existing folder stays as it
// was), no temporary folder is left behind, and a killed writer's unlocked one is removed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "nmkit/calib_model.h"
#include "nmkit/gguf.h"
#include "nmkit/model_source.h"
#include "nmkit/model_write.h"
#include "nmkit/safetensors.h"
#include "nmkit/tokenizer.h"
#include "tests/calib/tiny_gguf.h"

namespace nmkit {
namespace {

namespace fs = std::filesystem;

std::vector<float> logits_of(const LlamaModel& model, const std::vector<int32_t>& tokens) {
  LlamaSession session(model, static_cast<int64_t>(tokens.size()));
  std::vector<float> logits(tokens.size() * static_cast<size_t>(model.params().n_vocab));
  const Status st = model.forward(session, tokens.data(), static_cast<int64_t>(tokens.size()), logits.data(), 0);
  EXPECT_TRUE(st.ok()) << st.error().message();
  return logits;
}

class PruneToHf : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nmkit_prune_to_hf_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  bool no_temporaries() const {
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename().string().find(".tmp.") != std::string::npos) return false;
    }
    return true;
  }
  fs::path dir_;
};

TEST_F(PruneToHf, SparseGptModelReloadsWithIdenticalLogitsAndTokenizer) {
  const LlamaParams p = params();
  write_tiny_gguf(path("tiny.gguf"), p);
  auto source = ModelSource::open(path("tiny.gguf"));
  ASSERT_TRUE(source.ok()) << source.error().message();
  ModelOptions options;
  options.keep_dense_weights = true;
  auto model = LlamaModel::build(source->params(), source->loader(), options);
  ASSERT_TRUE(model.ok()) << model.error().message();
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<int32_t> token(0, 63);
  std::vector<int32_t> calib(3 * 24), probe(30);
  for (int32_t& t : calib) t = token(rng);
  for (int32_t& t : probe) t = token(rng);
  CalibOptions calib_options;
  calib_options.pattern = *Pattern::parse("2:4");
  calib_options.method = CalibMethod::SparseGpt;
  auto report = calibrate_and_prune(*model, calib, 3, 24, calib_options);
  ASSERT_TRUE(report.ok()) << report.error().message();
  const std::vector<float> want = logits_of(*model, probe);

  const std::string out = path("hf");
  const Status written = write_model_hf(out + "/", *model, *source);
  ASSERT_TRUE(written.ok()) << written.error().message();
  EXPECT_TRUE(no_temporaries());
  const mode_t mask = ::umask(0);  // the folder gets the mode any folder the user makes gets
  ::umask(mask);
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0777 & ~mask);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                        "generation_config.json"}) {
    EXPECT_TRUE(fs::is_regular_file(out + "/" + f)) << f;
  }
  auto file = SafetensorsFile::open(out + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->tensors().size(), 3u + 9u * 2u);
  for (const char* name : {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
                           "model.layers.1.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight",
                           "model.layers.1.post_attention_layernorm.weight"}) {
    EXPECT_NE(file->find(name), nullptr) << name;
  }
  // HF row h*d + s*d/2 + i holds GGUF row h*d + 2i + s (convert_hf_to_gguf.py's permute inverted).
  auto dense = model->tensors();
  ASSERT_TRUE(dense.ok());
  for (const NamedTensor& t : *dense) {
    if (t.name != "blk.0.attn_k.weight") continue;
    const TensorView hf = file->view(*file->find("model.layers.0.self_attn.k_proj.weight"));
    const int64_t d = p.head_dim(), K = p.n_embd;
    for (int64_t h = 0; h < p.n_head_kv; ++h) {
      for (int64_t i = 0; i < d / 2; ++i) {
        for (int64_t s = 0; s < 2; ++s) {
          EXPECT_EQ(std::memcmp(reinterpret_cast<const float*>(hf.data) + (h * d + s * d / 2 + i) * K,
                                t.tensor.as<float>() + (h * d + 2 * i + s) * K, K * sizeof(float)),
                    0);
        }
      }
    }
  }

  auto reloaded_source = ModelSource::open(out);
  ASSERT_TRUE(reloaded_source.ok()) << reloaded_source.error().message();
  const LlamaParams& q = reloaded_source->params();
  EXPECT_EQ(q.n_vocab, p.n_vocab);
  EXPECT_EQ(q.n_head_kv, p.n_head_kv);
  EXPECT_EQ(q.n_ctx_train, p.n_ctx_train);
  EXPECT_EQ(q.rms_eps, p.rms_eps);
  EXPECT_EQ(q.rope_base, p.rope_base);
  EXPECT_EQ(q.tied_output, p.tied_output);
  auto reloaded = LlamaModel::build(q, reloaded_source->loader(), ModelOptions{});
  ASSERT_TRUE(reloaded.ok()) << reloaded.error().message();
  const std::vector<float> got = logits_of(*reloaded, probe);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "logits differ";
  int64_t zeros = 0;  // the model that went through is the pruned one (2:4: half of every linear)
  for (const NamedTensor& t : *dense) {
    if (t.name != "blk.1.ffn_up.weight") continue;
    for (int64_t i = 0; i < t.tensor.numel(); ++i) zeros += t.tensor.as<float>()[i] == 0.0f;
    EXPECT_GE(zeros, t.tensor.numel() / 2);
  }
  EXPECT_GT(zeros, 0);

  auto from_gguf = Tokenizer::from_gguf(*source->gguf());
  auto from_json = Tokenizer::from_hf_json(out + "/tokenizer.json");
  ASSERT_TRUE(from_gguf.ok() && from_json.ok()) << (from_json.ok() ? "" : from_json.error().message());
  const std::string text = "AB 12 3 ?! <|endoftext|> Z";
  for (bool special : {false, true}) {
    EXPECT_EQ(*from_gguf->encode(text, true, special), *from_json->encode(text, true, special)) << special;
  }
  EXPECT_EQ(from_json->eos(), 63);
  EXPECT_EQ(from_json->token_type(63), TokenType::kControl);

  // An nmkit folder is replaced; a folder holding anything else is refused and left as it was.
  ASSERT_TRUE(write_model_hf(out, *model, *source, DType::BF16).ok());
  EXPECT_TRUE(no_temporaries());
  auto bf16 = SafetensorsFile::open(out + "/model.safetensors");
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(bf16->find("lm_head.weight")->dtype, DType::BF16);
  std::ofstream(out + "/notes.txt") << "mine";
  const Status refused = write_model_hf(out, *model, *source);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("notes.txt"), std::string::npos) << refused.error().message();
  EXPECT_TRUE(fs::exists(out + "/notes.txt"));
  EXPECT_EQ(bf16->find("lm_head.weight")->dtype, DType::BF16);
  EXPECT_TRUE(no_temporaries());
}

TEST_F(PruneToHf, FailureMidWriteLeavesNoFolderAndStaleTemporariesGo) {
  const LlamaParams p = params();
  write_tiny_gguf(path("tiny.gguf"), p);
  auto source = ModelSource::open(path("tiny.gguf"));
  ASSERT_TRUE(source.ok()) << source.error().message();
  ModelOptions options;
  options.keep_dense_weights = true;
  auto model = LlamaModel::build(source->params(), source->loader(), options);
  ASSERT_TRUE(model.ok());
  // A failure while model.safetensors is being written (here a throwing progress callback, which
  // the writer turns into an Error): no folder, no temporary.
  auto fail_at_5 = [](size_t i, size_t, const OutputTensor&) {
    if (i == 5) throw std::runtime_error("disk on fire");
  };
  const Status failed = write_model_hf(path("out"), *model, *source, DType::F32, fail_at_5);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message().find("disk on fire"), std::string::npos) << failed.error().message();
  EXPECT_FALSE(fs::exists(path("out")));
  EXPECT_TRUE(no_temporaries());
  // The same over an existing folder leaves it as it was.
  ASSERT_TRUE(write_model_hf(path("out"), *model, *source, DType::BF16).ok());
  ASSERT_FALSE(write_model_hf(path("out"), *model, *source, DType::F32, fail_at_5).ok());
  auto kept = SafetensorsFile::open(path("out/model.safetensors"));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->find("model.embed_tokens.weight")->dtype, DType::BF16);
  EXPECT_TRUE(no_temporaries());
  // A temporary folder of a killed writer (nobody holds its lock, older than the write) is removed
  // by the next write; one being written (locked), or made after the write began, is not.
  fs::create_directories(path("out.tmp.AbC123"));
  std::ofstream(path("out.tmp.AbC123/config.json")) << "{}";
  fs::create_directories(path("out.tmp.Locked"));
  for (const char* stale : {"out.tmp.AbC123", "out.tmp.Locked"}) {  // older than the write to come
    fs::last_write_time(path(stale), fs::file_time_type::clock::now() - std::chrono::seconds(5));
  }
  fs::create_directories(path("out.tmp.Young1"));  // another writer's, just made: not yet locked
  const int fd = ::open(path("out.tmp.Locked").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ASSERT_TRUE(write_model_hf(path("out"), *model, *source).ok());
  EXPECT_FALSE(fs::exists(path("out.tmp.AbC123")));
  EXPECT_TRUE(fs::exists(path("out.tmp.Locked")));
  EXPECT_TRUE(fs::exists(path("out.tmp.Young1")));
  ::close(fd);
}

// A SentencePiece vocabulary has no tokenizer.json writer (docs/design.md 11.8): the folder holds
// the model without tokenizer files.
TEST_F(PruneToHf, SentencePieceVocabularyWritesTheModelWithoutTokenizer) {
  const LlamaParams p = params();
  write_tiny_gguf(path("spm.gguf"), p, "llama");
  auto source = ModelSource::open(path("spm.gguf"));
  ASSERT_TRUE(source.ok()) << source.error().message();
  ModelOptions options;
  options.keep_dense_weights = true;
  auto model = LlamaModel::build(source->params(), source->loader(), options);
  ASSERT_TRUE(model.ok());
  const Status st = write_model_hf(path("out"), *model, *source);
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_TRUE(fs::exists(path("out/config.json")));
  EXPECT_TRUE(fs::exists(path("out/model.safetensors")));
  EXPECT_FALSE(fs::exists(path("out/tokenizer.json")));
  EXPECT_TRUE(no_temporaries());
  const Status file = write_model_hf(path("spm.gguf"), *model, *source);  // a file, not a folder
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.error().message().find("not a folder"), std::string::npos) << file.error().message();
}

}  // namespace
}  // namespace nmkit
