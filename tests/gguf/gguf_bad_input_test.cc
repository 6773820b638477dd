// GGUF reading: a hand-built file with every value type reads back exactly, and each kind of bad
// input (truncation at every byte, corrupt counts, lengths, types, offsets, alignment, duplicate
// names) fails in open() with one line naming the file and the bad value (docs/design.md 11.1).
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "nmkit/dtype.h"
#include "nmkit/gguf.h"
#include "src/io/gguf_parse.h"
#include "tests/gguf/gguf_hand_file.h"
#include "tests/io/io_test_util.h"

namespace nmkit {
namespace {

using test::Bytes;
using test::HandFile;
using test::HandTensor;
using test::kv_head;

#define EXPECT_MENTIONS(message, ...)                                                                 \
  do {                                                                                                \
    for (const std::string& piece : std::initializer_list<std::string>{__VA_ARGS__}) {                \
      EXPECT_NE((message).find(piece), std::string::npos) << "'" << piece << "' missing in: " << (message); \
    }                                                                                                 \
  } while (0)

// A file with one key of every value type, nested arrays, an F32 tensor and a Q8_0 tensor.
HandFile good_file() {
  HandFile f;
  f.kvs.push_back(kv_head("general.architecture", 8).str("llama").b);
  f.kvs.push_back(kv_head("t.u8", 0).put<uint8_t>(200).b);
  f.kvs.push_back(kv_head("t.i8", 1).put<int8_t>(-5).b);
  f.kvs.push_back(kv_head("t.u16", 2).put<uint16_t>(60000).b);
  f.kvs.push_back(kv_head("t.i16", 3).put<int16_t>(-300).b);
  f.kvs.push_back(kv_head("t.u32", 4).put<uint32_t>(4000000000u).b);
  f.kvs.push_back(kv_head("t.i32", 5).put<int32_t>(-70000).b);
  f.kvs.push_back(kv_head("t.f32", 6).put<float>(1.5f).b);
  f.kvs.push_back(kv_head("t.bool", 7).put<uint8_t>(1).b);
  f.kvs.push_back(kv_head("t.u64", 10).put<uint64_t>(uint64_t{1} << 40).b);
  f.kvs.push_back(kv_head("t.i64", 11).put<int64_t>(-(int64_t{1} << 40)).b);
  f.kvs.push_back(kv_head("t.f64", 12).put<double>(0.1).b);
  f.kvs.push_back(kv_head("t.strings", 9).put<uint32_t>(8).put<uint64_t>(2).str("a").str("bc").b);
  f.kvs.push_back(kv_head("t.floats", 9).put<uint32_t>(6).put<uint64_t>(2).put<float>(0.5f).put<float>(-2.0f).b);
  Bytes nested = kv_head("t.nested", 9);
  nested.put<uint32_t>(9).put<uint64_t>(2);
  nested.put<uint32_t>(5).put<uint64_t>(2).put<int32_t>(1).put<int32_t>(2);
  nested.put<uint32_t>(5).put<uint64_t>(1).put<int32_t>(3);
  f.kvs.push_back(nested.b);
  f.tensors.push_back({"w", {3, 2}, 0, 0});
  f.tensors.push_back({"q", {32, 1}, 8, 32});
  Bytes data;
  for (int i = 1; i <= 6; ++i) data.put<float>(static_cast<float>(i));
  for (int i = 0; i < 8; ++i) data.put<uint8_t>(0);
  data.put<uint16_t>(0x3800);  // f16 0.5
  for (int i = 0; i < 32; ++i) data.put<int8_t>(static_cast<int8_t>(i - 16));
  f.data = data.b;
  return f;
}

class GgufRead : public ::testing::Test {
 protected:
  std::string path() const { return dir_.file("model.gguf"); }

  Result<GgufFile> open(const std::vector<uint8_t>& bytes) {
    test::write_bytes(path(), bytes);
    return GgufFile::open(path());
  }

  // Opens `bytes`, which must fail with one line starting with the path; returns the message.
  std::string open_error(const std::vector<uint8_t>& bytes) {
    auto file = open(bytes);
    EXPECT_FALSE(file.ok()) << "opened a bad file";
    if (file.ok()) return "";
    const std::string& message = file.error().message();
    EXPECT_EQ(message.rfind(path() + ": ", 0), 0u) << "message must start with the path: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "message must be one line: " << message;
    return message;
  }

  test::TempDir dir_;
};

TEST_F(GgufRead, EveryValueTypeReadsBack) {
  auto file = open(good_file().bytes());
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  ASSERT_EQ(file->metadata().size(), 15u);
  EXPECT_EQ(file->metadata()[0].key, "general.architecture");
  EXPECT_EQ(file->metadata()[14].key, "t.nested");
  EXPECT_EQ(*file->get_string("general.architecture"), "llama");
  EXPECT_EQ(*file->get_uint("t.u8"), 200u);
  EXPECT_EQ(*file->get_int("t.i8"), -5);
  EXPECT_EQ(*file->get_uint("t.u16"), 60000u);
  EXPECT_EQ(*file->get_int("t.i16"), -300);
  EXPECT_EQ(*file->get_uint("t.u32"), 4000000000u);
  EXPECT_EQ(*file->get_int("t.i32"), -70000);
  EXPECT_EQ(*file->get_float("t.f32"), 1.5);
  EXPECT_EQ(*file->get_bool("t.bool"), true);
  EXPECT_EQ(*file->get_uint("t.u64"), uint64_t{1} << 40);
  EXPECT_EQ(*file->get_int("t.i64"), -(int64_t{1} << 40));
  EXPECT_EQ(*file->get_float("t.f64"), 0.1);
  EXPECT_EQ(*file->get_string_array("t.strings"), (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(*file->get_float_array("t.floats"), (std::vector<float>{0.5f, -2.0f}));
  const GgufValue* nested = file->find_key("t.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->element_type, GgufType::Array);
  ASSERT_EQ(nested->elements.size(), 2u);
  EXPECT_EQ(nested->elements[0].elements.size(), 2u);
  EXPECT_EQ(*nested->elements[1].elements[0].as_int(), 3);
  EXPECT_EQ(file->find_key("absent"), nullptr);

  ASSERT_EQ(file->tensors().size(), 2u);
  const GgufTensorInfo* w = file->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape(), (Shape{2, 3}));  // ne reversed
  EXPECT_EQ(w->nbytes, 24u);
  auto wv = file->dequantize(*w);
  ASSERT_TRUE(wv.ok()) << wv.error().message();
  EXPECT_EQ(wv->to_f32(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  auto qv = file->dequantize("q");
  ASSERT_TRUE(qv.ok()) << qv.error().message();
  ASSERT_EQ(qv->shape(), (Shape{1, 32}));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(qv->as<float>()[i], 0.5f * static_cast<float>(i - 16)) << i;
  EXPECT_EQ(file->raw(*file->find("q")).size(), 34u);
}

TEST_F(GgufRead, TypedGettersNameFileKeyAndType) {
  auto file = open(good_file().bytes());
  ASSERT_TRUE(file.ok()) << file.error().message();
  auto missing = file->get_uint("llama.block_count");
  ASSERT_FALSE(missing.ok());
  EXPECT_MENTIONS(missing.error().message(), path(), "no metadata key 'llama.block_count'");
  auto wrong = file->get_uint("general.architecture");
  ASSERT_FALSE(wrong.ok());
  EXPECT_MENTIONS(wrong.error().message(), path(), "'general.architecture'", "is string", "expected an integer");
  auto negative = file->get_uint("t.i8");
  ASSERT_FALSE(negative.ok());
  EXPECT_MENTIONS(negative.error().message(), "'t.i8'", "-5");
  auto not_float = file->get_float("t.u8");
  ASSERT_FALSE(not_float.ok());
  EXPECT_MENTIONS(not_float.error().message(), "'t.u8'", "is u8");
  auto not_strings = file->get_string_array("t.floats");
  ASSERT_FALSE(not_strings.ok());
  EXPECT_MENTIONS(not_strings.error().message(), "'t.floats'", "array of f32");
  auto absent = file->dequantize("nope");
  ASSERT_FALSE(absent.ok());
  EXPECT_MENTIONS(absent.error().message(), path(), "no tensor 'nope'");
}

TEST_F(GgufRead, TruncationAtEveryByteFails) {
  // Parsed from memory (the validation open() runs on the mapping), each prefix in its own
  // exact-size allocation so that a sanitizer build catches any read past it.
  const std::vector<uint8_t> bytes = good_file().bytes();
  ASSERT_TRUE(io::parse_gguf("m.gguf", reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()).ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    SCOPED_TRACE("truncated to " + std::to_string(n) + " of " + std::to_string(bytes.size()) + " bytes");
    const auto prefix = std::make_unique<std::byte[]>(n);
    if (n > 0) std::memcpy(prefix.get(), bytes.data(), n);
    auto parsed = io::parse_gguf("m.gguf", prefix.get(), n);
    ASSERT_FALSE(parsed.ok());
    const std::string& message = parsed.error().message();
    EXPECT_EQ(message.rfind("m.gguf: ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    const bool named = message.find("truncated") != std::string::npos ||
                       message.find("runs past") != std::string::npos ||
                       message.find("not a GGUF file") != std::string::npos ||
                       message.find("needs at least") != std::string::npos;
    EXPECT_TRUE(named) << message;
  }
}

TEST_F(GgufRead, MagicAndVersion) {
  std::vector<uint8_t> bytes = good_file().bytes();
  bytes[0] = 'X';
  EXPECT_MENTIONS(open_error(bytes), "not a GGUF file");
  HandFile f = good_file();
  f.version = 1;
  EXPECT_MENTIONS(open_error(f.bytes()), "GGUF version 1", "not supported");
  f.version = 0x03000000u;
  EXPECT_MENTIONS(open_error(f.bytes()), "big-endian");
  f.version = 2;
  EXPECT_TRUE(open(f.bytes()).ok());
}

TEST_F(GgufRead, CountsBoundedByTheFile) {
  HandFile f = good_file();
  f.kv_count = int64_t{1} << 60;
  EXPECT_MENTIONS(open_error(f.bytes()), "key-value count 1152921504606846976");
  f = good_file();
  f.tensor_count = int64_t{1} << 40;
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor count 1099511627776");
  f = good_file();
  f.kv_count = 16;  // one more than there are: the tensor infos are read as a key
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor 1 of 2 name");  // the tensor infos, misread as key 15, run out
}

TEST_F(GgufRead, CorruptLengthsAndTypes) {
  HandFile f = good_file();
  f.kvs[0] = kv_head("general.architecture", 8).put<uint64_t>(uint64_t{1} << 62).b;
  EXPECT_MENTIONS(open_error(f.bytes()), "'general.architecture'", "length 4611686018427387904", "runs past");
  f = good_file();
  f.kvs[1] = kv_head("t.u8", 13).put<uint8_t>(0).b;
  EXPECT_MENTIONS(open_error(f.bytes()), "'t.u8'", "unknown value type 13");
  f = good_file();
  f.kvs[1] = kv_head("t.arr", 9).put<uint32_t>(77).put<uint64_t>(1).b;
  EXPECT_MENTIONS(open_error(f.bytes()), "'t.arr'", "unknown value type 77");
  f = good_file();
  f.kvs[1] = kv_head("t.arr", 9).put<uint32_t>(4).put<uint64_t>(uint64_t{1} << 61).b;
  EXPECT_MENTIONS(open_error(f.bytes()), "'t.arr'", "array count 2305843009213693952");
  f = good_file();
  f.kvs[1] = kv_head("t.bad_bool", 7).put<uint8_t>(2).b;
  EXPECT_MENTIONS(open_error(f.bytes()), "'t.bad_bool'", "bool value 2");
  f = good_file();
  Bytes strings = kv_head("t.strings", 9);
  strings.put<uint32_t>(8).put<uint64_t>(2).str("a").put<uint64_t>(1000000);
  f.kvs[1] = strings.b;
  EXPECT_MENTIONS(open_error(f.bytes()), "'t.strings'[1]", "length 1000000");
}

TEST_F(GgufRead, NestingDepthIsBounded) {
  HandFile f = good_file();
  Bytes deep = kv_head("t.deep", 9);
  for (int i = 0; i < 100; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  deep.put<uint32_t>(4).put<uint64_t>(0);
  f.kvs[1] = deep.b;
  EXPECT_MENTIONS(open_error(f.bytes()), "'t.deep'", "nested deeper than 8");
}

TEST_F(GgufRead, DuplicateNames) {
  HandFile f = good_file();
  f.kvs[2] = kv_head("t.u8", 1).put<int8_t>(3).b;
  EXPECT_MENTIONS(open_error(f.bytes()), "key 't.u8'", "listed twice");
  f = good_file();
  f.tensors[1].name = "w";
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor 'w'", "listed twice");
}

// A tensor count above the infos the file holds: the reader runs into the padding and the data. The
// message names the count (issue 24, item 7: it said "tensor '': n_dims 335544320").
TEST_F(GgufRead, TensorCountBeyondTheInfos) {
  HandFile f = good_file();
  f.tensor_count = static_cast<int64_t>(f.tensors.size()) + 1;
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor 3 of 3");
}

TEST_F(GgufRead, TensorInfos) {
  HandFile f = good_file();
  f.tensors[0].n_dims_override = 5;
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor 'w'", "n_dims 5");
  f = good_file();
  f.tensors[0].ne = {};
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor 'w'", "n_dims 0");
  f = good_file();
  f.tensors[0].ne = {3, uint64_t{1} << 63};
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor 'w'", "ne[1] 9223372036854775808");
  f = good_file();
  f.tensors[0].ne = {uint64_t{1} << 40, uint64_t{1} << 40};
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor 'w'", "overflows");
  f = good_file();
  f.tensors[1].ne = {31, 1};
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor 'q'", "ne[0] 31", "Q8_0");
  for (uint32_t unknown : {4u, 5u, 31u, 99u, 0xFFFFFFFFu}) {
    f = good_file();
    f.tensors[1].type = unknown;
    EXPECT_MENTIONS(open_error(f.bytes()), "tensor 'q'", "unknown ggml type " + std::to_string(unknown));
  }
}

TEST_F(GgufRead, OffsetsAndAlignment) {
  HandFile f = good_file();
  f.tensors[1].offset = 33;
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor 'q'", "offset 33", "alignment 32");
  f = good_file();
  f.tensors[1].offset = 64;
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor 'q'", "runs past the data section");
  f = good_file();
  f.tensors[1].offset = uint64_t{1} << 63;
  EXPECT_MENTIONS(open_error(f.bytes()), "tensor 'q'", "runs past");
  f = good_file();
  f.tensors[0].ne = {9, 2};  // 72 bytes: runs into q at 32
  f.data.resize(32 + 34 + 64);
  EXPECT_MENTIONS(open_error(f.bytes()), "overlaps");
  f = good_file();
  f.kvs.push_back(kv_head("general.alignment", 4).put<uint32_t>(48).b);
  f.alignment = 48;
  EXPECT_MENTIONS(open_error(f.bytes()), "'general.alignment'", "48", "power of two");
  f = good_file();
  f.kvs.push_back(kv_head("general.alignment", 4).put<uint32_t>(0).b);
  EXPECT_MENTIONS(open_error(f.bytes()), "'general.alignment'", "0", "power of two");
  f = good_file();
  f.kvs.push_back(kv_head("general.alignment", 10).put<uint64_t>(32).b);
  EXPECT_MENTIONS(open_error(f.bytes()), "'general.alignment'", "u64", "expected u32");
  f = good_file();
  f.kvs.push_back(kv_head("general.alignment", 4).put<uint32_t>(16).b);
  f.alignment = 16;
  f.tensors[1].offset = 16;  // 16-aligned now; w ends at 24, so q must start at 32 at the earliest
  EXPECT_MENTIONS(open_error(f.bytes()), "overlaps");
  f.tensors[1].offset = 32;
  auto sixteen = open(f.bytes());
  ASSERT_TRUE(sixteen.ok()) << sixteen.error().message();
  EXPECT_EQ(sixteen->alignment(), 16u);
}

TEST_F(GgufRead, UnsupportedDequantizationNamesTensorAndType) {
  HandFile f = good_file();
  f.tensors[1] = {"k2", {256}, 10, 32};  // Q2_K: 84 bytes per 256
  f.data.resize(32 + 84);
  auto file = open(f.bytes());
  ASSERT_TRUE(file.ok()) << file.error().message();
  auto values = file->dequantize("k2");
  ASSERT_FALSE(values.ok());
  EXPECT_MENTIONS(values.error().message(), path(), "tensor 'k2'", "Q2_K");
}

TEST_F(GgufRead, MissingFile) {
  auto file = GgufFile::open(dir_.file("absent.gguf"));
  ASSERT_FALSE(file.ok());
  EXPECT_MENTIONS(file.error().message(), dir_.file("absent.gguf"), "No such file");
}

}  // namespace
}  // namespace nmkit
