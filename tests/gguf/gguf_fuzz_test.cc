// Random corruption of a valid GGUF: parse_gguf may refuse it (one line naming the file) but must
// never crash, hang or accept tensors outside the data section; what it accepts dequantizes
// without reading out of bounds (run under the sanitizer build to check that).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "nmkit/gguf.h"
#include "src/io/gguf_parse.h"
#include "tests/io/io_test_util.h"

namespace nmkit {
namespace {

std::vector<uint8_t> seed_file(const test::TempDir& dir) {
  std::vector<GgufKeyValue> kvs = {
      {"general.architecture", GgufValue::of_string("llama")},
      {"a.u32", GgufValue::of_uint32(7)},
      {"a.f32", GgufValue::of_float32(0.5f)},
      {"a.bool", GgufValue::of_bool(false)},
      {"a.tokens", GgufValue::of_array(GgufType::String, {GgufValue::of_string("x"), GgufValue::of_string("yz")})},
      {"a.nested", GgufValue::of_array(GgufType::Array, {GgufValue::of_array(GgufType::I32, {GgufValue::of_int32(-1)})})},
  };
  std::vector<GgufOutputTensor> tensors;
  const auto add = [&](const char* name, GgmlType type, Shape shape) {
    const uint64_t bytes = static_cast<uint64_t>(shape_numel(shape)) / ggml_block_elements(type) * ggml_block_bytes(type);
    tensors.push_back({name, type, shape, [bytes](std::byte* dst) {
                         for (uint64_t i = 0; i < bytes; ++i) dst[i] = static_cast<std::byte>(i * 37 % 251);
                         return ok_status();
                       }});
  };
  add("f32", GgmlType::F32, {2, 3});
  add("q4_1", GgmlType::Q4_1, {2, 32});
  add("q6_k", GgmlType::Q6_K, {1, 256});
  add("bf16", GgmlType::BF16, {5});
  const std::string path = dir.file("seed.gguf");
  EXPECT_TRUE(write_gguf(path, kvs, tensors).ok());
  return test::read_bytes(path);
}

std::vector<uint8_t> mutate(const std::vector<uint8_t>& good, size_t header_end, std::mt19937_64& rng) {
  std::vector<uint8_t> bytes = good;
  const auto header_pos = [&]() { return rng() % header_end; };
  const int rounds = 1 + static_cast<int>(rng() % 3);
  for (int r = 0; r < rounds && !bytes.empty(); ++r) {
    switch (rng() % 5) {
      case 0:  // flip one bit
        bytes[header_pos() % bytes.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // truncate
        bytes.resize(rng() % bytes.size());
        break;
      case 2: {  // an extreme or nearby value in a u64 or u32 field (counts, lengths, ne, offsets)
        const size_t pos = header_pos() % bytes.size();
        const uint64_t choices[] = {0, 1, 0xFFFFFFFFu, 0xFFFFFFFFFFFFFFFFull, uint64_t{1} << 63, 31, 32, 33,
                                    rng() % 4096};
        const uint64_t v = choices[rng() % 9];
        const size_t width = rng() % 2 ? 8 : 4;
        for (size_t i = 0; i < width && pos + i < bytes.size(); ++i) bytes[pos + i] = static_cast<uint8_t>(v >> (8 * i));
        break;
      }
      case 3:  // insert a byte
        bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(header_pos() % bytes.size()), static_cast<uint8_t>(rng()));
        break;
      default:  // delete a byte
        bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(header_pos() % bytes.size()));
        break;
    }
  }
  return bytes;
}

TEST(GgufFuzz, CorruptHeadersNeverCrashOrEscapeTheFile) {
  test::TempDir dir;
  const std::vector<uint8_t> good = seed_file(dir);
  auto parsed_good = io::parse_gguf("seed.gguf", reinterpret_cast<const std::byte*>(good.data()), good.size());
  ASSERT_TRUE(parsed_good.ok()) << parsed_good.error().message();
  const size_t header_end = static_cast<size_t>(parsed_good->data_start);
  const uint64_t seed = 20261123;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int accepted = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    const std::vector<uint8_t> bytes = mutate(good, header_end, rng);
    // An exact-size copy, so a sanitizer build catches any read past the end.
    const auto copy = std::make_unique<std::byte[]>(bytes.size());
    if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
    auto parsed = io::parse_gguf("fuzz.gguf", copy.get(), bytes.size());
    if (!parsed.ok()) {
      const std::string& m = parsed.error().message();
      ASSERT_EQ(m.rfind("fuzz.gguf: ", 0), 0u) << "iteration " << iteration << ": " << m;
      ASSERT_EQ(m.find('\n'), std::string::npos) << "iteration " << iteration << ": " << m;
      continue;
    }
    ++accepted;
    for (const GgufTensorInfo& t : parsed->tensors) {
      ASSERT_LE(parsed->data_start + t.offset + t.nbytes, bytes.size()) << "iteration " << iteration << ": " << t.name;
      if (ggml_can_dequantize(t.type) && t.numel() <= (1 << 20)) {
        std::vector<float> out(static_cast<size_t>(t.numel()));
        ASSERT_TRUE(dequantize_ggml(t.type, copy.get() + parsed->data_start + t.offset, out.data(), t.numel()).ok());
      }
    }
  }
  std::printf("%d of 20000 mutations accepted\n", accepted);
  EXPECT_GT(accepted, 0);  // some mutations only touch values: the check above did run
}

}  // namespace
}  // namespace nmkit
