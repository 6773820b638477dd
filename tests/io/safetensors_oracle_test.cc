// Differential test of header validation: random, structure-aware edits of a valid header (dtypes,
// shapes, offsets, missing or repeated fields, data size) are judged by an independent oracle that
// applies the rules as written (on the hand JSON parser), and open() must agree with it on accept
// versus refuse, and on the tensor list when it accepts.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "nmkit/safetensors.h"
#include "src/io/safetensors_header.h"
#include "tests/io/io_test_util.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

using test::Json;

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  int64_t end = 0;
  bool drop_dtype = false, drop_shape = false, drop_offsets = false, extra_field = false;
};

const std::vector<std::pair<std::string, int>> kSizes = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I64", 8}, {"I32", 4},
    {"I16", 2}, {"I8", 1}, {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}};

int size_of(const std::string& dtype) {
  for (const auto& [name, size] : kSizes) {
    if (name == dtype) return size;
  }
  return 0;
}

std::string serialize(const std::vector<Entry>& entries, const std::string& metadata) {
  std::string h = "{";
  bool first = true;
  if (!metadata.empty()) {
    h += "\"__metadata__\":" + metadata;
    first = false;
  }
  for (const Entry& e : entries) {
    if (!first) h += ',';
    first = false;
    h += '"';
    h += e.name;
    h += "\":{";
    std::vector<std::string> fields;
    if (!e.drop_dtype) fields.push_back("\"dtype\":\"" + e.dtype + "\"");
    if (!e.drop_shape) {
      std::string s = "\"shape\":[";
      for (size_t i = 0; i < e.shape.size(); ++i) {
        if (i > 0) s += ',';
        s += std::to_string(e.shape[i]);
      }
      fields.push_back(s + "]");
    }
    if (!e.drop_offsets) {
      std::string o = "\"data_offsets\":[";
      o += std::to_string(e.begin);
      o += ',';
      o += std::to_string(e.end);
      o += ']';
      fields.push_back(o);
    }
    if (e.extra_field) fields.push_back("\"note\":[1,{\"x\":null}]");
    for (size_t i = 0; i < fields.size(); ++i) {
      if (i > 0) h += ',';
      h += fields[i];
    }
    h += "}";
  }
  return h + "}";
}

struct Expected {
  bool ok = false;
  std::vector<std::string> names;  // in data order
};

// The rules of the safetensors format as the brief states them, applied directly.
Expected oracle(const std::string& header, uint64_t data_size) {
  Expected out;
  Json root;
  if (!test::parse_json(header, root) || root.kind != Json::Kind::Object) return out;
  struct T {
    std::string name;
    uint64_t begin, end;
    size_t position;
  };
  std::vector<T> tensors;
  std::vector<std::string> seen;
  for (size_t m = 0; m < root.members.size(); ++m) {
    const auto& [key, value] = root.members[m];
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return out;  // duplicate key
    seen.push_back(key);
    if (value.kind != Json::Kind::Object) return out;
    std::vector<std::string> fields;
    for (const auto& [k, v] : value.members) {
      if (std::find(fields.begin(), fields.end(), k) != fields.end()) return out;  // duplicate field
      fields.push_back(k);
    }
    if (key == "__metadata__") {
      for (const auto& [k, v] : value.members) {
        if (v.kind != Json::Kind::String) return out;
      }
      continue;
    }
    const Json* dtype = value.get("dtype");
    const Json* shape = value.get("shape");
    const Json* offsets = value.get("data_offsets");
    if (!dtype || !shape || !offsets || dtype->kind != Json::Kind::String || size_of(dtype->string) == 0) return out;
    if (shape->kind != Json::Kind::Array) return out;
    uint64_t bytes = static_cast<uint64_t>(size_of(dtype->string));
    for (const Json& d : shape->items) {
      if (d.kind != Json::Kind::Int || d.integer < 0) return out;
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d.integer), &bytes)) return out;  // overflow
    }
    if (offsets->kind != Json::Kind::Array || offsets->items.size() != 2) return out;
    for (const Json& o : offsets->items) {
      if (o.kind != Json::Kind::Int || o.integer < 0) return out;
    }
    const auto begin = static_cast<uint64_t>(offsets->items[0].integer);
    const auto end = static_cast<uint64_t>(offsets->items[1].integer);
    if (begin > end || end > data_size || end - begin != bytes) return out;
    tensors.push_back({key, begin, end, m});
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const T& a, const T& b) { return std::tie(a.begin, a.end, a.position) < std::tie(b.begin, b.end, b.position); });
  uint64_t covered = 0;
  for (const T& t : tensors) {
    if (t.begin != covered) return out;  // overlap or hole
    covered = t.end;
    out.names.push_back(t.name);
  }
  if (covered != data_size) return out;
  out.ok = true;
  return out;
}

TEST(SafetensorsOracle, RandomStructuredEditsAgreeWithTheRules) {
  const uint64_t seed = 31337;
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  int accepted = 0;
  const int iterations = 6000;
  for (int it = 0; it < iterations; ++it) {
    // A valid layout of 1-6 tensors, some of them empty.
    std::vector<Entry> entries;
    const int count = 1 + static_cast<int>(rng() % 6);
    int64_t offset = 0;
    for (int i = 0; i < count; ++i) {
      Entry e;
      e.name = "t";  // not "t" + std::to_string(i): GCC 12's false -Wrestrict once inlined in a unity batch
      e.name += std::to_string(i);
      e.dtype = kSizes[rng() % kSizes.size()].first;
      const int rank = static_cast<int>(rng() % 4);
      for (int d = 0; d < rank; ++d) e.shape.push_back(static_cast<int64_t>(rng() % 4));
      int64_t n = size_of(e.dtype);
      for (const int64_t d : e.shape) n *= d;
      e.begin = offset;
      e.end = offset + n;
      offset = e.end;
      entries.push_back(e);
    }
    std::shuffle(entries.begin(), entries.end(), rng);
    int64_t data_size = offset;
    std::string metadata = rng() % 3 == 0 ? R"({"format":"pt"})" : "";

    // 0-3 edits.
    const int edits = static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      Entry& e = entries[rng() % entries.size()];
      const auto delta = [&] { return static_cast<int64_t>(rng() % 5) - 2; };
      switch (rng() % 12) {
        case 0: e.dtype = rng() % 4 == 0 ? "F31" : kSizes[rng() % kSizes.size()].first; break;
        case 1:
          if (!e.shape.empty()) e.shape[rng() % e.shape.size()] += delta();
          break;
        case 2: e.shape.push_back(static_cast<int64_t>(rng() % 3)); break;
        case 3: e.begin += delta(); break;
        case 4: e.end += delta(); break;
        case 5: std::swap(e.begin, e.end); break;
        case 6: data_size = std::max<int64_t>(0, data_size + delta()); break;
        case 7: (rng() % 3 == 0 ? e.drop_dtype : rng() % 2 ? e.drop_shape : e.drop_offsets) = true; break;
        case 8: e.extra_field = true; break;
        case 9: entries.push_back(entries[rng() % entries.size()]); break;  // a repeated name
        case 10: metadata = rng() % 2 ? R"({"a":"b","c":1})" : R"({"a":"b","a":"c"})"; break;
        default: e.shape.assign({int64_t{1} << 40, int64_t{1} << 40, 16}); break;  // overflow
      }
    }
    const std::string header = serialize(entries, metadata);
    const std::vector<uint8_t> file = test::hand_file(header, std::vector<uint8_t>(static_cast<size_t>(data_size), 7));
    const Expected expected = oracle(header, static_cast<uint64_t>(data_size));
    auto parsed = io::parse_safetensors_header("o.safetensors", reinterpret_cast<const std::byte*>(file.data()), file.size());
    ASSERT_EQ(parsed.ok(), expected.ok) << "iteration " << it << ": " << header << " data " << data_size << "\n"
                                        << (parsed.ok() ? std::string("accepted") : parsed.error().message());
    if (parsed.ok()) {
      ++accepted;
      std::vector<std::string> names;
      for (const TensorInfo& t : parsed->tensors) names.push_back(t.name);
      ASSERT_EQ(names, expected.names) << "iteration " << it << ": " << header;
    }
  }
  std::printf("oracle: %d of %d edited headers valid, all judged alike\n", accepted, iterations);
  EXPECT_GT(accepted, iterations / 10);
  EXPECT_LT(accepted, iterations - iterations / 10);
}

}  // namespace
}  // namespace nmkit
