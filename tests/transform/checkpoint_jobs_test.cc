// prune, slide and quantize of whole checkpoints through the driver, on hand-sized files whose
// expected outputs are worked out here (the CLI suites and tests/slide_cli check them at scale
// against independent numpy implementations).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "nmkit/checkpoint.h"
#include "nmkit/prune_checkpoint.h"
#include "nmkit/quantize_checkpoint.h"
#include "nmkit/safetensors.h"
#include "nmkit/slide_checkpoint.h"
#include "tests/io/io_test_util.h"

namespace nmkit {
namespace {

std::vector<float> floats(const SafetensorsFile& file, const std::string& name) {
  auto view = file.view(name);
  EXPECT_TRUE(view.ok()) << name;
  if (!view.ok()) return {};
  std::vector<float> out(static_cast<size_t>(view->numel()));
  std::memcpy(out.data(), view->data, view->nbytes());
  return out;
}

class CheckpointJobsTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, std::vector<OutputTensor> tensors) {
    const std::string path = dir_.file(name);
    EXPECT_TRUE(write_safetensors(path, tensors).ok());
    return path;
  }
  test::TempDir dir_;
};

// 2:4 magnitude on "w" [2, 4]: the two largest |w| of each row survive. "norm.w" is not selected.
TEST_F(CheckpointJobsTest, PrunesSelectedWeightsAndCopiesTheRest) {
  PruneCheckpointJob job;
  job.input = write("in.safetensors", {OutputTensor::owning("w", Tensor::from_f32({1, -3, 2, 0.5f, -4, 0.25f, 0.5f, 3}, {2, 4})),
                                       OutputTensor::owning("norm.w", Tensor::from_f32({1, 2, 3, 4}, {1, 4}))});
  job.output = dir_.file("out.safetensors");
  job.pattern = Pattern{2, 4};
  job.selected = [](std::string_view name) { return name == "w"; };
  int progress = 0;
  job.on_tensor = [&progress](size_t, size_t, const std::string&) { ++progress; };
  auto outcome = prune_checkpoint(job);
  ASSERT_TRUE(outcome.ok()) << outcome.error().message();
  auto out = SafetensorsFile::open(job.output);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(floats(*out, "w"), (std::vector<float>{0, -3, 2, 0, -4, 0, 0, 3}));
  EXPECT_EQ(floats(*out, "norm.w"), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(out->metadata().count(record_key("w")), 1u);
  EXPECT_EQ(out->metadata().count(record_key("norm.w")), 0u);
  ASSERT_EQ(outcome->tensors.size(), 1u);
  EXPECT_EQ(outcome->copied_tensors, 1u);
  EXPECT_EQ(progress, 2);
}

TEST_F(CheckpointJobsTest, PruneRefusesAMethodWithoutItsInputs) {
  PruneCheckpointJob job;
  job.input = write("in.safetensors", {OutputTensor::owning("w", Tensor::from_f32({1, 2, 3, 4}, {1, 4}))});
  job.output = dir_.file("out.safetensors");
  job.pattern = Pattern{2, 4};
  job.method = PruneMethod::Gradient;
  auto outcome = prune_checkpoint(job);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.error().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(dir_.entries(), std::vector<std::string>{"in.safetensors"});
}

// 6:8 needs at most 6 non-zeros per group of 8: a dense row does not comply, and the job says so
// with the caller's hint and writes nothing.
TEST_F(CheckpointJobsTest, SlideOfANonCompliantWeightLeavesNoOutput) {
  SlideCheckpointJob job;
  job.input = write("in.safetensors", {OutputTensor::owning("w", Tensor::from_f32({1, 2, 3, 4, 5, 6, 7, 8}, {1, 8}))});
  job.output = dir_.file("out.safetensors");
  job.pattern = Pattern{6, 8};
  job.noncompliant_hint = "prune it first";
  auto outcome = slide_checkpoint(job);
  ASSERT_FALSE(outcome.ok());
  const std::string& message = outcome.error().message();
  EXPECT_EQ(message.rfind(job.input + ": ", 0), 0u) << message;
  EXPECT_NE(message.find("; prune it first"), std::string::npos) << message;
  EXPECT_EQ(dir_.entries(), std::vector<std::string>{"in.safetensors"});
}

// int8 per token: scale = absmax/127, codes = rne(x * 127/absmax).
TEST_F(CheckpointJobsTest, QuantizesEvery2DFloatTensorAndDropsTheRest) {
  QuantizeCheckpointJob job;
  job.input = write("in.safetensors", {OutputTensor::owning("x", Tensor::from_f32({127, -63.5f, 0, 1}, {1, 4})),
                                       OutputTensor::owning("bias", Tensor::from_f32({1, 2}, {2}))});
  job.output = dir_.file("out.safetensors");
  auto outcome = quantize_checkpoint(job);
  ASSERT_TRUE(outcome.ok()) << outcome.error().message();
  auto out = SafetensorsFile::open(job.output);
  ASSERT_TRUE(out.ok());
  std::vector<std::string> names;
  for (const TensorInfo& info : out->tensors()) names.push_back(info.name);
  EXPECT_EQ(names, (std::vector<std::string>{"x.codes", "x.scales"}));
  auto codes = out->view("x.codes");
  ASSERT_TRUE(codes.ok());
  std::vector<int8_t> q(4);
  std::memcpy(q.data(), codes->data, 4);
  EXPECT_EQ(q, (std::vector<int8_t>{127, -64, 0, 1}));  // -63.5 rounds to even: -64
  EXPECT_EQ(floats(*out, "x.scales"), std::vector<float>{1.0f});
  EXPECT_EQ(out->metadata().count("nmkit-quantize"), 1u);
  EXPECT_EQ(outcome->skipped_tensors, 1u);
  EXPECT_EQ(outcome->tensors.at(0).scale_max, 1.0f);
}

TEST_F(CheckpointJobsTest, QuantizeWithNothingToDoLeavesNoOutput) {
  QuantizeCheckpointJob job;
  job.input = write("in.safetensors", {OutputTensor::owning("bias", Tensor::from_f32({1, 2}, {2}))});
  job.output = dir_.file("out.safetensors");
  auto outcome = quantize_checkpoint(job);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.error().message(), job.input + ": no 2-D F32/F16/BF16 tensor to quantize");
  EXPECT_EQ(dir_.entries(), std::vector<std::string>{"in.safetensors"});
}

}  // namespace
}  // namespace nmkit

namespace nmkit {
namespace {

// The weight of a stored tensor as sparse24 (what every cutlass_sm80 weight loads as).
Sparse24 load_sparse24(const std::string& path, const std::string& name) {
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file.ok());
  auto stored = list_stored(*file);
  EXPECT_TRUE(stored.ok()) << stored.error().message();
  for (const StoredTensor& st : *stored) {
    if (st.name != name) continue;
    auto loaded = load_weight(*file, st);
    EXPECT_TRUE(loaded.ok()) << loaded.error().message();
    if (loaded.ok() && std::holds_alternative<Sparse24>(*loaded)) return std::move(std::get<Sparse24>(*loaded));
  }
  ADD_FAILURE() << name << " is not a sparse24 weight of " << path;
  return {};
}

void expect_same(const Sparse24& a, const Sparse24& b) {
  ASSERT_EQ(a.K, b.K);
  ASSERT_EQ(a.values.shape(), b.values.shape());
  EXPECT_EQ(0, std::memcmp(a.values.data(), b.values.data(), a.values.nbytes()));
  EXPECT_EQ(0, std::memcmp(a.meta.data(), b.meta.data(), a.meta.nbytes()));
}

// A prune or slide job from `input` to `output` storing its 2:4 weights in `layout`.
template <class Job, class Outcome>
void run_sparse24_job(Result<Outcome> (*run)(const Job&), const std::string& input, const std::string& output,
                      Pattern pattern, StoredLayout layout) {
  Job job;
  job.input = input;
  job.output = output;
  job.pattern = pattern;
  job.format = WeightFormat::Sparse24;
  job.layout = layout;
  auto outcome = run(job);
  ASSERT_TRUE(outcome.ok()) << outcome.error().message();
}

// prune and slide --format cutlass_sm80: the parts are CUTLASS's SM80 layout (padded shapes, record
// "cutlass_sm80"), and loading gives back exactly the sparse24 weight of --format sparse24.
TEST_F(CheckpointJobsTest, CutlassSm80FormatLoadsAsTheSparse24Weight) {
  std::vector<float> values(20 * 37);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 7919) % 23) - 11.0f;
  const std::string in = write("in.safetensors", {OutputTensor::owning("w", Tensor::from_f32(values, {20, 37}, DType::BF16))});
  for (const bool slide_it : {false, true}) {
    SCOPED_TRACE(slide_it ? "slide 6:8" : "prune 2:4");
    std::string outputs[2];
    for (const StoredLayout layout : {StoredLayout::Canonical, StoredLayout::CutlassSm80}) {
      const std::string out = dir_.file((slide_it ? "slid" : "pruned") + std::to_string(static_cast<int>(layout)));
      if (slide_it) {
        PruneCheckpointJob prune;  // slide needs a 6:8-compliant weight first
        prune.input = in;
        prune.output = out + ".68";
        prune.pattern = Pattern{6, 8};
        ASSERT_TRUE(prune_checkpoint(prune).ok());
        run_sparse24_job(slide_checkpoint, prune.output, out, Pattern{6, 8}, layout);
      } else {
        run_sparse24_job(prune_checkpoint, in, out, Pattern{2, 4}, layout);
      }
      outputs[static_cast<int>(layout)] = out;
    }
    auto file = SafetensorsFile::open(outputs[1]);
    ASSERT_TRUE(file.ok());
    EXPECT_NE(file->metadata().at(record_key("w")).find("\"cutlass_sm80\""), std::string::npos);
    const TensorInfo* meta = file->find("w.meta");
    ASSERT_NE(meta, nullptr);
    EXPECT_EQ(meta->shape[0], 32);  // rows padded to the 16-bit words' interleave of 32
    expect_same(load_sparse24(outputs[0], "w"), load_sparse24(outputs[1], "w"));
  }
}

TEST_F(CheckpointJobsTest, CutlassSm80FormatRefusesF32Weights) {
  PruneCheckpointJob job;
  job.input = write("f32.safetensors", {OutputTensor::owning("w", Tensor::from_f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}))});
  job.output = dir_.file("out.safetensors");
  job.pattern = Pattern{2, 4};
  job.format = WeightFormat::Sparse24;
  job.layout = StoredLayout::CutlassSm80;
  auto outcome = prune_checkpoint(job);
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(outcome.error().message().find("'w'"), std::string::npos) << outcome.error().message();
  EXPECT_NE(outcome.error().message().find("F32"), std::string::npos) << outcome.error().message();
  EXPECT_FALSE(SafetensorsFile::open(job.output).ok());  // no output
  auto record = decode_record("f", "w", R"({"format":"cutlass_sm80","pattern":"2:4","dtype":"F32","shape":[2,4]})");
  EXPECT_FALSE(record.ok());
}

}  // namespace
}  // namespace nmkit
