// prune, slide and quantize of whole checkpoints through the driver, on hand-sized files whose
// expected outputs are worked out here (the CLI suites and tests/slide_cli check them at scale
// against independent numpy implementations).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
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
