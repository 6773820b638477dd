// Random corruption of a valid file: open() may refuse it (one-line error) but must never crash,
// hang or accept a header whose tensors do not tile the data section.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "nmkit/safetensors.h"
#include "src/io/safetensors_header.h"
#include "tests/io/io_test_util.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

std::vector<uint8_t> valid_file(const test::TempDir& dir) {
  std::vector<Tensor> tensors;
  tensors.push_back(test::random_tensor(DType::F32, {3, 5}, 1));
  tensors.push_back(test::random_tensor(DType::BF16, {7}, 2));
  tensors.push_back(Tensor::zeros(DType::I64, {}));
  tensors.push_back(Tensor::zeros(DType::U8, {0, 3}));
  tensors.push_back(Tensor::zeros(DType::Bool, {2, 2}));
  std::vector<OutputTensor> outputs;
  const char* names[] = {"model.layers.0.mlp.weight", "norm.bias", "step", "empty", "mask"};
  for (size_t i = 0; i < tensors.size(); ++i) outputs.push_back(OutputTensor::copy_of(names[i], tensors[i].view()));
  const std::string path = dir.file("seed.safetensors");
  EXPECT_TRUE(write_safetensors(path, outputs, {{"format", "pt"}, {"nmkit.x", "{\"a\":1}"}}).ok());
  return test::read_bytes(path);
}

std::vector<uint8_t> mutate(const std::vector<uint8_t>& good, std::mt19937_64& rng) {
  std::vector<uint8_t> bytes = good;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | good[static_cast<size_t>(i)];
  const size_t header_end = static_cast<size_t>(8 + n);
  // Most mutations hit the header: data bytes are opaque to the reader.
  const auto header_pos = [&]() { return 8 + rng() % (header_end - 8); };
  const auto any_pos = [&]() { return rng() % bytes.size(); };
  static const std::string structural = "{}[]\":,-0123456789eE. \\tu";
  const int rounds = 1 + static_cast<int>(rng() % 3);
  for (int r = 0; r < rounds && !bytes.empty(); ++r) {
    switch (rng() % 6) {
      case 0:  // flip one bit
        bytes[rng() % 4 == 0 ? any_pos() : header_pos()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // truncate
        bytes.resize(rng() % bytes.size());
        break;
      case 2:  // a JSON-structural character in the header
        if (bytes.size() > header_end) bytes[header_pos()] = static_cast<uint8_t>(structural[rng() % structural.size()]);
        break;
      case 3: {  // lie in the length prefix
        uint64_t len = rng() % 2 == 0 ? n + (rng() % 33) - 16 : rng();
        for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(len >> (8 * i));
        break;
      }
      case 4:  // insert a byte in the header
        if (bytes.size() > header_end) {
          bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(header_pos()), static_cast<uint8_t>(rng()));
        }
        break;
      default:  // delete a byte
        bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(any_pos()));
        break;
    }
  }
  return bytes;
}

// What an accepted header promises: tensors in offset order tiling the data section exactly.
void check_accepted(const io::ParsedHeader& header, size_t size) {
  ASSERT_LE(header.data_start, size);
  uint64_t covered = 0;
  for (const TensorInfo& t : header.tensors) {
    ASSERT_EQ(t.begin, covered) << t.name;
    ASSERT_LE(t.begin, t.end);
    ASSERT_EQ(t.end - t.begin, static_cast<uint64_t>(shape_numel(t.shape)) * dtype_size(t.dtype));
    covered = t.end;
  }
  ASSERT_EQ(header.data_start + covered, size);
}

TEST(SafetensorsFuzz, CorruptedHeadersNeverCrash) {
  const uint64_t seed = 4242;
  SCOPED_TRACE(test::seed_trace(seed));
  test::TempDir dir;
  const std::vector<uint8_t> good = valid_file(dir);
  std::mt19937_64 rng(seed);
  int accepted = 0;
  // NMKIT_FUZZ_ITERATIONS runs longer campaigns by hand (e.g. under -fsanitize=address).
  const char* env = std::getenv("NMKIT_FUZZ_ITERATIONS");
  const int iterations = env != nullptr ? std::atoi(env) : 20000;
  for (int it = 0; it < iterations; ++it) {
    const std::vector<uint8_t> bytes = mutate(good, rng);
    auto parsed = io::parse_safetensors_header("fuzz.safetensors", reinterpret_cast<const std::byte*>(bytes.data()),
                                               bytes.size());
    if (parsed.ok()) {
      ++accepted;
      check_accepted(*parsed, bytes.size());
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "iteration " << it;
        return;
      }
    } else {
      const std::string& message = parsed.error().message();
      ASSERT_EQ(message.rfind("fuzz.safetensors: ", 0), 0u) << message;
      ASSERT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
  std::printf("fuzz: %d of %d mutated headers accepted (the rest refused)\n", accepted, iterations);
  EXPECT_LT(accepted, iterations);
}

TEST(SafetensorsFuzz, CorruptedFilesOpenOrFailCleanly) {
  const uint64_t seed = 99;
  SCOPED_TRACE(test::seed_trace(seed));
  test::TempDir dir;
  const std::vector<uint8_t> good = valid_file(dir);
  std::mt19937_64 rng(seed);
  const std::string path = dir.file("fuzz.safetensors");
  for (int it = 0; it < 300; ++it) {
    const std::vector<uint8_t> bytes = mutate(good, rng);
    test::write_bytes(path, bytes);
    auto file = SafetensorsFile::open(path);
    if (!file.ok()) {
      ASSERT_EQ(file.error().message().rfind(path + ": ", 0), 0u) << file.error().message();
      continue;
    }
    // Every view of an accepted file lies inside the mapping: touch all of its bytes.
    unsigned sum = 0;
    for (const TensorInfo& t : file->tensors()) {
      const TensorView v = file->view(t);
      for (size_t i = 0; i < v.nbytes(); ++i) sum += static_cast<unsigned>(v.data[i]);
    }
    ::testing::Test::RecordProperty("sum", static_cast<int>(sum & 0xFFFF));
  }
}

}  // namespace
}  // namespace nmkit
