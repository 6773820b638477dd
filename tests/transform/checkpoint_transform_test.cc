// The checkpoint transform driver (include/nmkit/checkpoint_transform.h): selection, copy, drop and
// replace, records in the metadata, progress per tensor, and no output whenever a plan, a fill or the
// final check fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "nmkit/checkpoint.h"
#include "nmkit/checkpoint_transform.h"
#include "nmkit/safetensors.h"
#include "tests/io/io_test_util.h"

namespace nmkit {
namespace {

// The input of every test: "a" [2, 3], "b" [4], "c" [2, 2] (F32, values 1, 2, 3, ... across the
// file) and one metadata entry.
const std::vector<float> kA{1, 2, 3, 4, 5, 6};
const std::vector<float> kB{7, 8, 9, 10};
const std::vector<float> kC{11, 12, 13, 14};

class CheckpointTransformTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<OutputTensor> tensors{OutputTensor::owning("a", Tensor::from_f32(kA, {2, 3})),
                                            OutputTensor::owning("b", Tensor::from_f32(kB, {4})),
                                            OutputTensor::owning("c", Tensor::from_f32(kC, {2, 2}))};
    ASSERT_TRUE(write_safetensors(input(), tensors, {{"origin", "test"}}).ok());
  }
  std::string input() const { return dir_.file("in.safetensors"); }
  std::string output() const { return dir_.file("out.safetensors"); }
  CheckpointTransformOptions options() const {
    CheckpointTransformOptions o;
    o.input = input();
    o.output = output();
    return o;
  }
  std::vector<float> floats(const SafetensorsFile& file, const std::string& name) {
    auto view = file.view(name);
    EXPECT_TRUE(view.ok()) << name;
    if (!view.ok()) return {};
    std::vector<float> out(static_cast<size_t>(view->numel()));
    std::memcpy(out.data(), view->data, view->nbytes());
    return out;
  }
  std::vector<std::string> names(const SafetensorsFile& file) {
    std::vector<std::string> out;
    for (const TensorInfo& info : file.tensors()) out.push_back(info.name);
    return out;
  }
  // The folder holds the input only: no output, no temporary.
  void expect_no_output() {
    EXPECT_EQ(dir_.entries(), std::vector<std::string>{"in.safetensors"});
  }

  test::TempDir dir_;
};

// "a" doubled into "a.doubled" (F32), by a fill that reads the input's view.
TensorPlan doubled(const SafetensorsFile& file, const StoredTensor& st) {
  const TensorView view = file.view(*st.parts[0]);
  OutputTensor out{st.name + ".doubled", DType::F32, view.shape, [view](std::byte* dst) {
                     for (int64_t i = 0; i < view.numel(); ++i) {
                       float x = 0;
                       std::memcpy(&x, view.data + 4 * i, 4);
                       x *= 2;
                       std::memcpy(dst + 4 * i, &x, 4);
                     }
                     return ok_status();
                   }};
  std::vector<OutputTensor> outputs;
  outputs.push_back(std::move(out));
  return TensorPlan::replace(std::move(outputs));
}

TEST_F(CheckpointTransformTest, SelectsCopiesAndTransforms) {
  CheckpointTransformOptions o = options();
  o.selected = [](std::string_view name) { return name != "c"; };
  std::vector<std::string> seen;
  auto outcome = transform_checkpoint(o, [&seen](const SafetensorsFile& file, const StoredTensor& st) -> Result<TensorPlan> {
    seen.push_back(st.name);
    if (st.name == "a") return doubled(file, st);
    return TensorPlan::copy();
  });
  ASSERT_TRUE(outcome.ok()) << outcome.error().message();
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));  // "c" is not selected: never planned

  auto out = SafetensorsFile::open(output());
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(names(*out), (std::vector<std::string>{"a.doubled", "b", "c"}));
  EXPECT_EQ(floats(*out, "a.doubled"), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(floats(*out, "b"), kB);
  EXPECT_EQ(floats(*out, "c"), kC);
  EXPECT_EQ(out->metadata(), (Metadata{{"origin", "test"}}));

  EXPECT_EQ(outcome->replaced, 1u);
  EXPECT_EQ(outcome->copied_parts, 2u);
  EXPECT_EQ(outcome->dropped_parts, 0u);
  EXPECT_EQ(outcome->input_bytes, (6u + 4u + 4u) * 4u);
  ASSERT_EQ(outcome->tensors.size(), 3u);
  EXPECT_EQ(outcome->tensors[0].name, "a");
  EXPECT_EQ(outcome->tensors[0].action, TensorAction::Replace);
  EXPECT_EQ(outcome->tensors[0].bytes_in, 24u);
  EXPECT_EQ(outcome->tensors[0].bytes_out, 24u);
  EXPECT_EQ(outcome->tensors[1].action, TensorAction::Copy);
  EXPECT_EQ(outcome->tensors[2].action, TensorAction::Copy);
}

TEST_F(CheckpointTransformTest, DropsUnselectedAndReplacesMetadata) {
  CheckpointTransformOptions o = options();
  o.selected = [](std::string_view name) { return name == "b"; };
  o.unselected = TensorAction::Drop;
  o.keep_metadata = false;
  o.metadata = {{"made-by", "driver test"}};
  auto outcome = transform_checkpoint(o, [](const SafetensorsFile& file, const StoredTensor& st) -> Result<TensorPlan> {
    return doubled(file, st);
  });
  ASSERT_TRUE(outcome.ok()) << outcome.error().message();
  auto out = SafetensorsFile::open(output());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(names(*out), std::vector<std::string>{"b.doubled"});
  EXPECT_EQ(floats(*out, "b.doubled"), (std::vector<float>{14, 16, 18, 20}));
  EXPECT_EQ(out->metadata(), (Metadata{{"made-by", "driver test"}}));
  EXPECT_EQ(outcome->dropped_parts, 2u);
}

// A replaced tensor's record lands under "nmkit.NAME" and reads back with list_stored.
TEST_F(CheckpointTransformTest, StoresTheRecordOfAReplacedTensor) {
  auto outcome = transform_checkpoint(options(), [](const SafetensorsFile& file, const StoredTensor& st) -> Result<TensorPlan> {
    if (st.name != "c") return TensorPlan::copy();
    WeightRecord record;
    record.format = WeightFormat::Dense;
    record.pattern = Pattern{2, 4};
    record.dtype = DType::F32;
    record.shape = {2, 2};
    std::vector<OutputTensor> outputs{OutputTensor::copy_of("c", file.view(*st.parts[0]))};
    return TensorPlan::replace(std::move(outputs), record);
  });
  ASSERT_TRUE(outcome.ok()) << outcome.error().message();
  auto out = SafetensorsFile::open(output());
  ASSERT_TRUE(out.ok());
  auto stored = list_stored(*out);
  ASSERT_TRUE(stored.ok()) << stored.error().message();
  ASSERT_EQ(stored->size(), 3u);
  EXPECT_FALSE((*stored)[0].record.has_value());
  ASSERT_TRUE((*stored)[2].record.has_value());
  EXPECT_EQ((*stored)[2].record->pattern.str(), "2:4");
  EXPECT_EQ(out->metadata().count("origin"), 1u);
}

TEST_F(CheckpointTransformTest, AFailingFillLeavesNoOutput) {
  auto outcome = transform_checkpoint(options(), [](const SafetensorsFile& file, const StoredTensor& st) -> Result<TensorPlan> {
    if (st.name != "b") return doubled(file, st);
    std::vector<OutputTensor> outputs{OutputTensor{"b", DType::F32, {4}, [](std::byte*) -> Status {
                                                     return Error("in.safetensors: tensor 'b': refused by the test");
                                                   }}};
    return TensorPlan::replace(std::move(outputs));
  });
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.error().message(), "in.safetensors: tensor 'b': refused by the test");  // passed on unchanged
  expect_no_output();
}

TEST_F(CheckpointTransformTest, AFailingFillLeavesAnExistingOutputUntouched) {
  test::write_bytes(output(), {1, 2, 3});
  auto outcome = transform_checkpoint(options(), [](const SafetensorsFile&, const StoredTensor&) -> Result<TensorPlan> {
    std::vector<OutputTensor> outputs{
        OutputTensor{"x", DType::F32, {1}, [](std::byte*) -> Status { return Error("refused"); }}};
    return TensorPlan::replace(std::move(outputs));
  });
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(test::read_bytes(output()), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(dir_.entries(), (std::vector<std::string>{"in.safetensors", "out.safetensors"}));
}

TEST_F(CheckpointTransformTest, AFailingPlanStopsBeforeAnyFill) {
  int fills = 0;
  int progress_calls = 0;
  CheckpointTransformOptions o = options();
  o.on_tensor = [&progress_calls](size_t, size_t, const std::string&) { ++progress_calls; };
  auto outcome = transform_checkpoint(o, [&fills](const SafetensorsFile&, const StoredTensor& st) -> Result<TensorPlan> {
    if (st.name == "c") return Error("in.safetensors: tensor 'c': cannot be transformed");
    std::vector<OutputTensor> outputs{OutputTensor{st.name, DType::U8, {1}, [&fills](std::byte* dst) -> Status {
                                                     ++fills;
                                                     dst[0] = std::byte{0};
                                                     return ok_status();
                                                   }}};
    return TensorPlan::replace(std::move(outputs));
  });
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.error().message(), "in.safetensors: tensor 'c': cannot be transformed");
  EXPECT_EQ(fills, 0);
  EXPECT_EQ(progress_calls, 0);
  expect_no_output();
}

TEST_F(CheckpointTransformTest, OnPlannedCanRefuseTheJob) {
  CheckpointTransformOptions o = options();
  o.on_planned = [](const CheckpointTransformOutcome& planned) -> Status {
    if (planned.replaced == 0) return Error("nothing to do");
    return ok_status();
  };
  auto outcome = transform_checkpoint(o, [](const SafetensorsFile&, const StoredTensor&) -> Result<TensorPlan> {
    return TensorPlan::copy();
  });
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.error().message(), "nothing to do");
  expect_no_output();
}

// Output names collide: the writer's check refuses it before the output is created.
TEST_F(CheckpointTransformTest, CollidingOutputNamesLeaveNoOutput) {
  auto outcome = transform_checkpoint(options(), [](const SafetensorsFile& file, const StoredTensor& st) -> Result<TensorPlan> {
    if (st.name != "a") return TensorPlan::copy();
    std::vector<OutputTensor> outputs{OutputTensor::copy_of("b", file.view(*st.parts[0]))};  // "b" is copied too
    return TensorPlan::replace(std::move(outputs));
  });
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(outcome.error().message().find("tensor 'b': listed twice"), std::string::npos) << outcome.error().message();
  expect_no_output();
}

TEST_F(CheckpointTransformTest, ReportsProgressOncePerOutputTensorInOrder) {
  CheckpointTransformOptions o = options();
  std::vector<std::string> progress;
  o.on_tensor = [&progress](size_t i, size_t n, const std::string& name) {
    progress.push_back(std::to_string(i) + "/" + std::to_string(n) + " " + name);
  };
  auto outcome = transform_checkpoint(o, [](const SafetensorsFile& file, const StoredTensor& st) -> Result<TensorPlan> {
    if (st.name == "b") return doubled(file, st);
    return TensorPlan::copy();
  });
  ASSERT_TRUE(outcome.ok()) << outcome.error().message();
  EXPECT_EQ(progress, (std::vector<std::string>{"0/3 a", "1/3 b.doubled", "2/3 c"}));
}

TEST_F(CheckpointTransformTest, PrepareWritesNothingUntilCommit) {
  auto prepared = prepare_checkpoint_transform(options(), [](const SafetensorsFile&, const StoredTensor&) -> Result<TensorPlan> {
    return TensorPlan::copy();
  });
  ASSERT_TRUE(prepared.ok()) << prepared.error().message();
  EXPECT_FALSE(test::read_bytes(input()).empty());
  const std::vector<std::string> entries = dir_.entries();
  EXPECT_EQ(entries.size(), 2u);  // the input and the temporary, not yet out.safetensors
  EXPECT_EQ(std::count(entries.begin(), entries.end(), "out.safetensors"), 0);
  ASSERT_TRUE(prepared->output.commit().ok());
  EXPECT_EQ(test::read_bytes(output()), test::read_bytes(input()));  // all copied: the same bytes
}

TEST_F(CheckpointTransformTest, AMissingInputNamesTheFile) {
  CheckpointTransformOptions o = options();
  o.input = dir_.file("absent.safetensors");
  auto outcome = transform_checkpoint(o, [](const SafetensorsFile&, const StoredTensor&) -> Result<TensorPlan> {
    return TensorPlan::copy();
  });
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(outcome.error().message().find("absent.safetensors"), std::string::npos) << outcome.error().message();
  expect_no_output();
}

}  // namespace
}  // namespace nmkit
