// prune_model_to, which prunes a model file as it writes it (no dense copy of the weights, blocks
// pulled by the writer), writes what the earlier whole-model path wrote, byte for byte: that path
// (the model built with keep_dense_weights, calibrate_model, then model_tensors written) is rebuilt
// here from the library's calls, for each method, to GGUF and to a Hugging Face folder, on a tiny f32
// GGUF whose blocks lie in file order or backwards (the writer then takes the last block first and
// the earlier ones wait for it). The reports agree too, linear by linear.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "nmkit/model_source.h"
#include "nmkit/model_write.h"
#include "nmkit/prune_model.h"
#include "nmkit/tokenizer.h"
#include "tests/calib/tiny_gguf.h"

namespace nmkit {
namespace {

namespace fs = std::filesystem;

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// What `nmkit prune` wrote before prune_model_to: the whole model built with its dense f32 weights
// kept, pruned in memory, then written from LlamaModel::tensors().
Result<CalibRun> prune_whole_model(const std::string& input, const std::string& output, const CalibTextOptions& o) {
  auto source = ModelSource::open(input);
  if (!source.ok()) return source.error();
  auto tokenizer = load_tokenizer(*source);
  if (!tokenizer.ok()) return tokenizer.error();
  ModelOptions options;
  options.keep_dense_weights = true;
  auto model = LlamaModel::build(source->params(), source->tensors(), options);
  if (!model.ok()) return model.error();
  auto run = calibrate_model(*model, &*tokenizer, o);
  if (!run.ok()) return run.error();
  auto out = parse_model_output(output, DType::F32, *source);
  if (!out.ok()) return out.error();
  auto tensors = model_tensors(*model);
  if (!tensors.ok()) return tensors.error();
  NMKIT_TRY(write_model_output(*out, *tensors, *source));
  return run;
}

using Case = std::tuple<CalibMethod, bool /* Hugging Face folder */, bool /* blocks backwards */>;

// A fresh folder per test (dir_), removed after it.
class PruneFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nmkit_prune_stream_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

class PruneStream : public PruneFiles, public ::testing::WithParamInterface<Case> {};

// A calibration text in the tiny vocabulary: 600 of its 60 printable bytes and the space.
void write_calib_text(const std::string& path, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> c(0x21, 0x5C), space(0, 5);
  std::ofstream out(path);
  for (int i = 0; i < 600; ++i) out << (space(rng) == 0 ? ' ' : static_cast<char>(c(rng)));
}

// 2:4 by `method`, calibrated on 3 sequences of 16 tokens of `text`.
CalibTextOptions calib_options(CalibMethod method, const std::string& text) {
  CalibTextOptions o;
  o.method = method;
  o.pattern = *Pattern::parse("2:4");
  o.text_path = text;
  o.n_seq = 3;
  o.seq_len = 16;
  return o;
}

TEST_P(PruneStream, WritesWhatTheWholeModelPathWrote) {
  const auto [method, hf, backwards] = GetParam();
  const LlamaParams p = params();
  const std::string model = (dir_ / "tiny.gguf").string();
  write_tiny_gguf(model, p, "gpt2", backwards);
  const std::string text = (dir_ / "calib.txt").string();
  write_calib_text(text, 11);
  CalibTextOptions o = calib_options(method, text);
  // The whole-model path calibrates in f32; Wanda's streamed passes default to bf16 (design.md 12).
  o.pass_weights = DType::F32;
  std::vector<int64_t> blocks;
  o.on_block = [&blocks](int64_t b, int64_t) { blocks.push_back(b); };
  const std::string suffix = hf ? "/" : ".gguf";
  const fs::path want_path = dir_ / "whole", got_path = dir_ / "streamed";
  auto want = prune_whole_model(model, want_path.string() + suffix, o);
  ASSERT_TRUE(want.ok()) << want.error().message();
  blocks.clear();
  int commits = 0;
  size_t tensors_written = 0;
  auto got = prune_model_to(
      model, got_path.string() + suffix, o, DType::F32, [&](size_t, size_t, const std::string&) { ++tensors_written; },
      [&](const CalibRun& run) {
        ++commits;
        EXPECT_EQ(run.report.linears.size(), 7u * static_cast<size_t>(p.n_layer));  // complete before the rename
        EXPECT_FALSE(fs::exists(got_path.string() + suffix));
        return ok_status();
      });
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(commits, 1);
  EXPECT_EQ(blocks, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(tensors_written, 3u + 9u * static_cast<size_t>(p.n_layer));

  // The files, byte for byte.
  std::vector<fs::path> files;
  if (hf) {
    for (const auto& e : fs::directory_iterator(want_path)) files.push_back(e.path().filename());
    EXPECT_GE(files.size(), 2u);
    for (const fs::path& f : files) {
      EXPECT_TRUE(file_bytes(want_path / f) == file_bytes(got_path / f)) << f;
    }
  } else {
    const std::string a = file_bytes(want_path.string() + suffix), b = file_bytes(got_path.string() + suffix);
    EXPECT_GT(a.size(), 0u);
    EXPECT_TRUE(a == b) << "the streamed GGUF differs from the whole-model path's";
  }
  // The reports.
  ASSERT_EQ(got->report.linears.size(), want->report.linears.size());
  for (size_t i = 0; i < want->report.linears.size(); ++i) {
    const LinearReport &w = want->report.linears[i], &g = got->report.linears[i];
    EXPECT_EQ(g.name, w.name);
    EXPECT_EQ(g.block, w.block);
    EXPECT_EQ(g.sums.pruned_count, w.sums.pruned_count) << w.name;
    EXPECT_EQ(g.sums.sq_pruned, w.sums.sq_pruned) << w.name;
    EXPECT_EQ(g.weight_relative_error, w.weight_relative_error) << w.name;
    EXPECT_EQ(g.output_error, w.output_error) << w.name;
  }
  EXPECT_EQ(got->text_tokens, want->text_tokens);
}

INSTANTIATE_TEST_SUITE_P(Methods, PruneStream,
                         ::testing::Combine(::testing::Values(CalibMethod::Magnitude, CalibMethod::Wanda,
                                                              CalibMethod::SparseGpt),
                                            ::testing::Bool(), ::testing::Bool()));

// design.md 12: unset, Wanda's passes run in bf16 on an F32 file (the output equals the explicit
// bf16 run's byte for byte and differs from the f32 run's); SparseGPT's in the file's f32.
TEST_F(PruneFiles, WandaPassesDefaultToBf16) {
  const fs::path& dir = dir_;
  const std::string model = (dir / "tiny.gguf").string();
  write_tiny_gguf(model, params());
  const std::string text = (dir / "calib.txt").string();
  write_calib_text(text, 12);
  for (CalibMethod method : {CalibMethod::Wanda, CalibMethod::SparseGpt}) {
    std::map<std::string, std::string> bytes;
    for (const auto& [name, pass] : std::vector<std::pair<std::string, std::optional<DType>>>{
             {"default", std::nullopt}, {"bf16", DType::BF16}, {"f32", DType::F32}}) {
      CalibTextOptions o = calib_options(method, text);
      o.pass_weights = pass;
      const fs::path out = dir / (name + ".gguf");
      auto got = prune_model_to(model, out.string(), o, DType::F32);
      ASSERT_TRUE(got.ok()) << got.error().message();
      bytes[name] = file_bytes(out);
    }
    const std::string same_as = method == CalibMethod::Wanda ? "bf16" : "f32";
    const std::string other = method == CalibMethod::Wanda ? "f32" : "bf16";
    EXPECT_TRUE(bytes["default"] == bytes[same_as]) << calib_method_name(method) << " default != " << same_as;
    EXPECT_FALSE(bytes["default"] == bytes[other]) << calib_method_name(method) << " default == " << other;
  }
}

// An error from the pruning itself (a text shorter than a sequence, a weight that is not finite)
// comes back as itself, and nothing is written.
TEST_F(PruneFiles, BeforeCommitErrorLeavesNothing) {
  const fs::path& dir = dir_;
  const std::string model = (dir / "tiny.gguf").string();
  write_tiny_gguf(model, params());
  CalibTextOptions o;
  o.method = CalibMethod::Magnitude;
  o.pattern = *Pattern::parse("2:4");
  auto got = prune_model_to(model, (dir / "out.gguf").string(), o, DType::F32, {},
                            [](const CalibRun&) -> Status { return Error("report folder is gone"); });
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message(), "report folder is gone");
  EXPECT_FALSE(fs::exists(dir / "out.gguf"));
}

}  // namespace
}  // namespace nmkit
