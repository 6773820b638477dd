// write_gguf: what it writes reads back through GgufFile (metadata in order with types, tensors in
// order with shapes, dtypes and bytes, alignment), the bytes of the header are the ones
// docs/design.md section 11.1 describes, and bad requests fail with nothing left behind.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "nmkit/dtype.h"
#include "nmkit/gguf.h"
#include "tests/io/io_test_util.h"

namespace nmkit {
namespace {

std::vector<GgufKeyValue> sample_metadata() {
  std::vector<GgufKeyValue> kvs;
  kvs.push_back({"general.architecture", GgufValue::of_string("llama")});
  kvs.push_back({"llama.block_count", GgufValue::of_uint32(30)});
  kvs.push_back({"t.i32", GgufValue::of_int32(-7)});
  kvs.push_back({"t.u64", GgufValue::of_uint64(uint64_t{1} << 50)});
  kvs.push_back({"t.f32", GgufValue::of_float32(1e-5f)});
  kvs.push_back({"t.bool", GgufValue::of_bool(true)});
  kvs.push_back({"t.tokens", GgufValue::of_array(GgufType::String, {GgufValue::of_string("a"), GgufValue::of_string("")})});
  kvs.push_back({"t.nested", GgufValue::of_array(GgufType::Array, {GgufValue::of_array(GgufType::I32, {GgufValue::of_int32(4)})})});
  return kvs;
}

Tensor iota(DType dtype, Shape shape) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 3.5f;
  return Tensor::from_f32(values, std::move(shape), dtype);
}

TEST(GgufWrite, RoundTripKeepsMetadataOrderTypesAndTensors) {
  test::TempDir dir;
  const std::string path = dir.file("out.gguf");
  std::vector<OutputTensor> tensors;
  tensors.push_back(OutputTensor::owning("b.weight", iota(DType::F16, {3, 5})));
  tensors.push_back(OutputTensor::owning("a.weight", iota(DType::F32, {7})));
  tensors.push_back(OutputTensor::owning("c.weight", iota(DType::BF16, {2, 1, 3, 4})));
  ASSERT_TRUE(write_gguf(path, sample_metadata(), tensors).ok());
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out.gguf"});  // no temporary left

  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  const auto kvs = sample_metadata();
  ASSERT_EQ(file->metadata().size(), kvs.size());
  for (size_t i = 0; i < kvs.size(); ++i) {
    EXPECT_EQ(file->metadata()[i].key, kvs[i].key);
    EXPECT_EQ(file->metadata()[i].value.type, kvs[i].value.type) << kvs[i].key;
  }
  EXPECT_EQ(*file->get_int("t.i32"), -7);
  EXPECT_EQ(*file->get_uint("t.u64"), uint64_t{1} << 50);
  EXPECT_EQ(*file->get_float("t.f32"), static_cast<double>(1e-5f));
  EXPECT_EQ(*file->get_string_array("t.tokens"), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(*file->find_key("t.nested")->elements[0].elements[0].as_int(), 4);

  ASSERT_EQ(file->tensors().size(), 3u);
  const GgmlType types[] = {GgmlType::F16, GgmlType::F32, GgmlType::BF16};
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& info = file->tensors()[i];
    EXPECT_EQ(info.name, tensors[i].name);
    EXPECT_EQ(info.shape(), tensors[i].shape);
    EXPECT_EQ(info.type, types[i]);
    EXPECT_EQ(info.offset % 32, 0u);
    const Tensor expected = iota(tensors[i].dtype, tensors[i].shape);
    ASSERT_EQ(file->raw(info).size(), expected.nbytes());
    EXPECT_EQ(std::memcmp(file->raw(info).data(), expected.data(), expected.nbytes()), 0) << info.name;
    auto values = file->dequantize(info);
    ASSERT_TRUE(values.ok());
    EXPECT_EQ(values->to_f32(), expected.to_f32());
  }
  // ne is nmkit's shape reversed: [3, 5] is written as ne = (5, 3).
  EXPECT_EQ(file->tensors()[0].ne, (std::vector<int64_t>{5, 3}));
}

TEST(GgufWrite, HeaderBytesAndAlignment) {
  test::TempDir dir;
  const std::string path = dir.file("aligned.gguf");
  GgufWriteOptions options;
  options.alignment = 64;
  std::vector<GgufKeyValue> kvs = {{"general.alignment", GgufValue::of_uint32(8)}};  // replaced
  std::vector<OutputTensor> tensors = {OutputTensor::owning("x", iota(DType::F32, {3})),
                                       OutputTensor::owning("y", iota(DType::F32, {2}))};
  ASSERT_TRUE(write_gguf(path, kvs, tensors, options).ok());
  const std::vector<uint8_t> bytes = test::read_bytes(path);
  ASSERT_GE(bytes.size(), 24u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 4), "GGUF");
  uint32_t version;
  uint64_t n_tensors, n_kv;
  std::memcpy(&version, &bytes[4], 4);
  std::memcpy(&n_tensors, &bytes[8], 8);
  std::memcpy(&n_kv, &bytes[16], 8);
  EXPECT_EQ(version, 3u);
  EXPECT_EQ(n_tensors, 2u);
  EXPECT_EQ(n_kv, 1u);
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(*file->get_uint("general.alignment"), 64u);
  EXPECT_EQ(file->data_offset() % 64, 0u);
  EXPECT_EQ(file->tensors()[1].offset, 64u);
  // Every tensor padded, the last included: the file ends on the alignment.
  EXPECT_EQ(bytes.size() % 64, 0u);
  EXPECT_EQ(bytes.size(), file->data_offset() + 128);
}

TEST(GgufWrite, QuantizedTensorsCopiedUnchanged) {
  test::TempDir dir;
  // A Q8_0 tensor of 2 rows x 64 (4 blocks of 34 bytes): d = 0.25, q = block index * 10 + lane - 16.
  std::vector<std::byte> blocks(4 * 34);
  for (int b = 0; b < 4; ++b) {
    const uint16_t d = 0x3400;  // f16 0.25
    std::memcpy(&blocks[static_cast<size_t>(b) * 34], &d, 2);
    for (int j = 0; j < 32; ++j) blocks[static_cast<size_t>(b) * 34 + 2 + static_cast<size_t>(j)] = static_cast<std::byte>(static_cast<int8_t>(b * 10 + j - 16));
  }
  GgufOutputTensor q{"q", GgmlType::Q8_0, {2, 64}, [&](std::byte* dst) {
                       std::memcpy(dst, blocks.data(), blocks.size());
                       return ok_status();
                     }};
  const std::string first = dir.file("first.gguf"), second = dir.file("second.gguf");
  ASSERT_TRUE(write_gguf(first, {}, std::vector<GgufOutputTensor>{q}).ok());
  auto file = GgufFile::open(first);
  ASSERT_TRUE(file.ok()) << file.error().message();
  ASSERT_EQ(file->tensors()[0].type, GgmlType::Q8_0);
  EXPECT_EQ(file->tensors()[0].ne, (std::vector<int64_t>{64, 2}));
  auto values = file->dequantize("q");
  ASSERT_TRUE(values.ok());
  for (int i = 0; i < 128; ++i) EXPECT_EQ(values->as<float>()[i], 0.25f * static_cast<float>((i / 32) * 10 + i % 32 - 16)) << i;
  // copy_of: the same bytes again, so the same file.
  ASSERT_TRUE(write_gguf(second, file->metadata(), std::vector<GgufOutputTensor>{GgufOutputTensor::copy_of(*file, file->tensors()[0])}).ok());
  EXPECT_EQ(test::read_bytes(first), test::read_bytes(second));
  // A row that is not whole blocks is refused.
  q.shape = {2, 48};
  const Status bad = write_gguf(dir.file("bad.gguf"), {}, std::vector<GgufOutputTensor>{q});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("Q8_0's block of 32"), std::string::npos) << bad.error().message();
}

class GgufWriteError : public ::testing::Test {
 protected:
  std::string write_error(const std::vector<OutputTensor>& tensors, const std::vector<GgufKeyValue>& kvs = {}) {
    const Status status = write_gguf(path(), kvs, tensors);
    EXPECT_FALSE(status.ok());
    EXPECT_TRUE(dir_.entries().empty()) << "a failed write left files behind";
    if (status.ok()) return "";
    EXPECT_EQ(status.error().message().find('\n'), std::string::npos);
    return status.error().message();
  }
  std::string path() const { return dir_.file("bad.gguf"); }
  test::TempDir dir_;
};

#define EXPECT_HAS(message, piece) EXPECT_NE((message).find(piece), std::string::npos) << (message)

TEST_F(GgufWriteError, RefusesWhatGgufCannotHold) {
  EXPECT_HAS(write_error({OutputTensor::owning("x", iota(DType::F32, {2})), OutputTensor::owning("x", iota(DType::F32, {2}))}),
             "tensor 'x': listed twice");
  EXPECT_HAS(write_error({OutputTensor::owning("s", Tensor::zeros(DType::F32, {}))}), "1 to 4");
  EXPECT_HAS(write_error({OutputTensor::owning("five", Tensor::zeros(DType::F32, {1, 1, 1, 1, 2}))}), "1 to 4");
  EXPECT_HAS(write_error({OutputTensor::owning("e4m3", Tensor::zeros(DType::F8_E4M3, {4}))}), "F8_E4M3");
  EXPECT_HAS(write_error({OutputTensor::owning(std::string(64, 'n'), Tensor::zeros(DType::F32, {4}))}), "64 bytes");
  EXPECT_HAS(write_error({}, {{"k", GgufValue::of_uint32(1)}, {"k", GgufValue::of_uint32(2)}}), "key 'k': listed twice");
  GgufValue mixed = GgufValue::of_array(GgufType::U32, {GgufValue::of_uint32(1), GgufValue::of_string("x")});
  EXPECT_HAS(write_error({}, {{"mixed", mixed}}), "'mixed'[1]");
}

TEST_F(GgufWriteError, FailingOrThrowingFillLeavesNothing) {
  OutputTensor failing = OutputTensor::owning("w", iota(DType::F32, {4}));
  failing.fill = [](std::byte*) -> Status { return Error("w: refused"); };
  EXPECT_HAS(write_error({OutputTensor::owning("a", iota(DType::F32, {4})), failing}), "w: refused");
  OutputTensor throwing = OutputTensor::owning("t", iota(DType::F32, {4}));
  throwing.fill = [](std::byte*) -> Status { throw std::runtime_error("boom"); };
  EXPECT_HAS(write_error({throwing}), "tensor 't': boom");
}

}  // namespace
}  // namespace nmkit
