// Round trips through write_safetensors and SafetensorsFile, cross-checked against a hand-built
// file (read side) and a hand JSON parser (write side), so neither side only agrees with itself.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "nmkit/safetensors.h"
#include "tests/io/io_test_util.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

using test::Json;

const std::vector<DType> kAllDTypes = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::F8_E4M3,
                                       DType::F8_E5M2, DType::I64, DType::I32, DType::I16, DType::I8,
                                       DType::U64, DType::U32, DType::U16, DType::U8, DType::Bool};

const std::vector<Shape> kShapes = {{}, {0}, {1}, {3}, {7, 3}, {2, 0, 5}, {1, 1, 1, 1}, {17}, {4, 15}, {0, 0}};

Tensor random_bytes_tensor(DType dtype, const Shape& shape, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(dtype, shape);
  for (size_t i = 0; i < t.nbytes(); ++i) {
    // Non-zero bytes, so an unwritten (zero-filled) region of the output cannot match.
    t.data()[i] = static_cast<std::byte>(1 + rng() % 255);
  }
  return t;
}

std::vector<uint8_t> bytes_of(const TensorView& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data);
  return std::vector<uint8_t>(p, p + v.nbytes());
}

struct Case {
  std::string name;
  Tensor tensor;
};

std::vector<Case> all_cases(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Case> cases;
  for (const DType dtype : kAllDTypes) {
    for (size_t s = 0; s < kShapes.size(); ++s) {
      cases.push_back({std::string(dtype_name(dtype)) + ".shape" + std::to_string(s), random_bytes_tensor(dtype, kShapes[s], rng)});
    }
  }
  // Writers keep the caller's order, which is not alphabetical here.
  std::shuffle(cases.begin(), cases.end(), rng);
  return cases;
}

const Metadata kMetadata = {{"format", "pt"},
                            {"empty", ""},
                            {"unicode", "h\xC3\xA9llo \xE2\x9C\x93"},
                            {"quote\"key", "line\nbreak\ttab"},
                            {"nmkit.generated", "free text"}};

TEST(SafetensorsRoundTrip, AllDTypesAndShapesKeepBytesOrderAndMetadata) {
  const uint64_t seed = 20261122;
  SCOPED_TRACE(test::seed_trace(seed));
  test::TempDir dir;
  const std::vector<Case> cases = all_cases(seed);
  std::vector<OutputTensor> outputs;
  for (size_t i = 0; i < cases.size(); ++i) {
    // Both helpers: borrowing views and owning copies.
    if (i % 2 == 0) {
      outputs.push_back(OutputTensor::copy_of(cases[i].name, cases[i].tensor.view()));
    } else {
      outputs.push_back(OutputTensor::owning(cases[i].name, Tensor::copy_of(cases[i].tensor.view())));
    }
  }
  const std::string path = dir.file("all.safetensors");
  ASSERT_TRUE(write_safetensors(path, outputs, kMetadata).ok());
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"all.safetensors"});

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->path(), path);
  EXPECT_EQ(file->metadata(), kMetadata);
  ASSERT_EQ(file->tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorInfo& info = file->tensors()[i];
    SCOPED_TRACE(cases[i].name);
    EXPECT_EQ(info.name, cases[i].name);  // data order = the order given to the writer
    EXPECT_EQ(info.dtype, cases[i].tensor.dtype());
    EXPECT_EQ(info.shape, cases[i].tensor.shape());
    EXPECT_EQ(info.end - info.begin, cases[i].tensor.nbytes());
    EXPECT_EQ(bytes_of(file->view(info)), bytes_of(cases[i].tensor.view()));
    ASSERT_EQ(file->find(cases[i].name), &info);
    auto by_name = file->view(cases[i].name);
    ASSERT_TRUE(by_name.ok());
    EXPECT_EQ(by_name->data, file->view(info).data);
  }
  auto missing = file->view("no.such.tensor");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(), path + ": no tensor 'no.such.tensor'");
  EXPECT_EQ(file->find("no.such.tensor"), nullptr);
}

TEST(SafetensorsRoundTrip, EmptyFileAndEmptyMetadata) {
  test::TempDir dir;
  const std::string path = dir.file("empty.safetensors");
  ASSERT_TRUE(write_safetensors(path, {}).ok());
  const std::vector<uint8_t> bytes = test::read_bytes(path);
  // "{}" padded to 8 bytes, no __metadata__ key when there is none (as the reference writes).
  EXPECT_EQ(bytes, test::hand_file("{}      ", {}));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_TRUE(file->metadata().empty());
}

// Reads what write_safetensors produced with an independent JSON parser and checks the layout rules.
TEST(SafetensorsRoundTrip, WriterOutputMatchesHandParser) {
  const uint64_t seed = 77;
  SCOPED_TRACE(test::seed_trace(seed));
  test::TempDir dir;
  const std::vector<Case> cases = all_cases(seed);
  std::vector<OutputTensor> outputs;
  for (const Case& c : cases) outputs.push_back(OutputTensor::copy_of(c.name, c.tensor.view()));
  const std::string path = dir.file("hand.safetensors");
  ASSERT_TRUE(write_safetensors(path, outputs, kMetadata).ok());

  const std::vector<uint8_t> bytes = test::read_bytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | bytes[static_cast<size_t>(i)];
  ASSERT_LE(8 + n, bytes.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "header padded so that the data starts 8-byte aligned";
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  const size_t last = header.find_last_not_of(' ');
  ASSERT_NE(last, std::string::npos);
  EXPECT_EQ(header[last], '}');
  EXPECT_LT(header.size() - last - 1, 8u) << "padding is fewer than 8 spaces";

  Json root;
  ASSERT_TRUE(test::parse_json(header, root)) << header;
  ASSERT_EQ(root.kind, Json::Kind::Object);
  ASSERT_EQ(root.members.size(), cases.size() + 1);
  EXPECT_EQ(root.members[0].first, "__metadata__");
  const Json& meta = root.members[0].second;
  Metadata parsed_meta;
  for (const auto& [k, v] : meta.members) {
    ASSERT_EQ(v.kind, Json::Kind::String);
    parsed_meta[k] = v.string;
  }
  EXPECT_EQ(parsed_meta, kMetadata);

  const uint64_t data_start = 8 + n;
  uint64_t expected_begin = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [name, entry] = root.members[i + 1];
    SCOPED_TRACE(name);
    EXPECT_EQ(name, cases[i].name);
    ASSERT_NE(entry.get("dtype"), nullptr);
    EXPECT_EQ(entry.get("dtype")->string, dtype_name(cases[i].tensor.dtype()));
    const Json* shape = entry.get("shape");
    ASSERT_NE(shape, nullptr);
    Shape parsed_shape;
    for (const Json& d : shape->items) parsed_shape.push_back(d.integer);
    EXPECT_EQ(parsed_shape, cases[i].tensor.shape());
    const Json* offsets = entry.get("data_offsets");
    ASSERT_NE(offsets, nullptr);
    ASSERT_EQ(offsets->items.size(), 2u);
    const auto begin = static_cast<uint64_t>(offsets->items[0].integer);
    const auto end = static_cast<uint64_t>(offsets->items[1].integer);
    EXPECT_EQ(begin, expected_begin) << "contiguous offsets in the given order";
    EXPECT_EQ(end - begin, cases[i].tensor.nbytes());
    ASSERT_LE(data_start + end, bytes.size());
    const std::vector<uint8_t> stored(bytes.begin() + static_cast<std::ptrdiff_t>(data_start + begin),
                                      bytes.begin() + static_cast<std::ptrdiff_t>(data_start + end));
    EXPECT_EQ(stored, bytes_of(cases[i].tensor.view()));
    expected_begin = end;
  }
  EXPECT_EQ(data_start + expected_begin, bytes.size()) << "no bytes after the last tensor";
}

void put_le(std::vector<uint8_t>& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// A file built byte by byte, with an odd header length (unaligned data), keys out of offset order,
// an unknown field, a 0-d scalar and an empty tensor.
TEST(SafetensorsRoundTrip, ReadsHandBuiltFile) {
  test::TempDir dir;
  const std::string header_text =
      R"({"b":{"dtype":"I16","shape":[3],"data_offsets":[8,14]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":"ignored"},)"
      R"("__metadata__":{"k":"v"},)"
      R"("flag":{"dtype":"BOOL","shape":[],"data_offsets":[14,15]},)"
      R"("none":{"dtype":"F64","shape":[0,4],"data_offsets":[15,15]},)"
      R"("big":{"dtype":"U64","shape":[1,1],"data_offsets":[15,23]}})";
  std::string header = header_text;
  if (header.size() % 8 == 0) header += ' ';  // trailing blanks are valid JSON; keep the data unaligned
  std::vector<uint8_t> data;
  const float a0 = 1.5f, a1 = -2.25f;
  uint32_t bits = 0;
  std::memcpy(&bits, &a0, 4);
  put_le(data, bits, 4);
  std::memcpy(&bits, &a1, 4);
  put_le(data, bits, 4);
  for (const int16_t v : {int16_t{-3}, int16_t{7}, int16_t{300}}) put_le(data, static_cast<uint16_t>(v), 2);
  data.push_back(1);
  put_le(data, 0x0123456789ABCDEFull, 8);
  const std::string path = dir.file("hand.safetensors");
  test::write_bytes(path, test::hand_file(header, data));

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  std::vector<std::string> names;
  for (const TensorInfo& t : file->tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "flag", "none", "big"}));
  EXPECT_EQ(file->metadata(), (Metadata{{"k", "v"}}));

  const TensorView a = file->view("a").value();
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.shape, (Shape{2}));
  float got[2];
  std::memcpy(got, a.data, 8);  // memcpy: the data is deliberately unaligned
  EXPECT_EQ(got[0], a0);
  EXPECT_EQ(got[1], a1);

  const TensorView b = file->view("b").value();
  EXPECT_EQ(b.dtype, DType::I16);
  int16_t got16[3];
  std::memcpy(got16, b.data, 6);
  EXPECT_EQ(got16[0], -3);
  EXPECT_EQ(got16[1], 7);
  EXPECT_EQ(got16[2], 300);

  const TensorView flag = file->view("flag").value();
  EXPECT_EQ(flag.dtype, DType::Bool);
  EXPECT_TRUE(flag.shape.empty());
  EXPECT_EQ(flag.numel(), 1);
  EXPECT_EQ(static_cast<uint8_t>(flag.data[0]), 1);

  const TensorView none = file->view("none").value();
  EXPECT_EQ(none.shape, (Shape{0, 4}));
  EXPECT_EQ(none.nbytes(), 0u);

  const TensorView big = file->view("big").value();
  uint64_t got64 = 0;
  std::memcpy(&got64, big.data, 8);
  EXPECT_EQ(got64, 0x0123456789ABCDEFull);
}

TEST(SafetensorsRoundTrip, ZeroByteTensorsShareAnOffset) {
  test::TempDir dir;
  const std::string header = R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                             R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("y":{"dtype":"I8","shape":[5,0],"data_offsets":[4,4]},)"
                             R"("z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})";
  const std::string path = dir.file("zero.safetensors");
  test::write_bytes(path, test::hand_file(header, {1, 2, 3, 4}));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  std::vector<std::string> names;
  for (const TensorInfo& t : file->tensors()) names.push_back(t.name);
  // Equal offsets keep header order.
  EXPECT_EQ(names, (std::vector<std::string>{"z", "w", "x", "y"}));
}

}  // namespace
}  // namespace nmkit

namespace nmkit {
namespace {

// Real checkpoints hold thousands of tensors; both directions must stay linear in the count (an
// earlier version used parsers whose inserts were quadratic). 20000 tensors, each 1-3 elements.
TEST(SafetensorsRoundTrip, ManyTensors) {
  const uint64_t seed = 5;
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  test::TempDir dir;
  const int count = 20000;
  std::vector<Tensor> tensors;
  std::vector<OutputTensor> outputs;
  tensors.reserve(count);
  for (int i = 0; i < count; ++i) {
    tensors.push_back(random_bytes_tensor(DType::U16, {static_cast<int64_t>(rng() % 4)}, rng));
    outputs.push_back(OutputTensor::copy_of("model.layers." + std::to_string(i) + ".weight", tensors.back().view()));
  }
  const std::string path = dir.file("many.safetensors");
  ASSERT_TRUE(write_safetensors(path, outputs).ok());
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  ASSERT_EQ(file->tensors().size(), static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const TensorInfo& info = file->tensors()[static_cast<size_t>(i)];
    ASSERT_EQ(info.name, outputs[static_cast<size_t>(i)].name);
    ASSERT_EQ(bytes_of(file->view(info)), bytes_of(tensors[static_cast<size_t>(i)].view()));
  }
}

}  // namespace
}  // namespace nmkit
