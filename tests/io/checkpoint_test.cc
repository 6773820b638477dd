// nmkit's checkpoint conventions: records in __metadata__, compressed weights as NAME.values plus
// NAME.meta / NAME.mask, grouping into logical tensors and loading them back.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "nmkit/checkpoint.h"
#include "tests/io/io_test_util.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// A random [rows, K] weight with at most `keep` non-zeros in every group of `group` (tail included).
Tensor pruned_weight(DType dtype, int64_t rows, int64_t K, Pattern p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v = test::random_floats(static_cast<size_t>(rows * K), seed, 0.25f, 2.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g0 = 0; g0 < K; g0 += p.group) {
      const int64_t len = std::min<int64_t>(p.group, K - g0);
      std::vector<int64_t> idx(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) idx[static_cast<size_t>(i)] = i;
      std::shuffle(idx.begin(), idx.end(), rng);
      // Keep a random number up to `keep`, so groups with fewer non-zeros occur too.
      const int64_t kept = std::min<int64_t>(len, static_cast<int64_t>(rng() % static_cast<uint64_t>(p.keep + 1)));
      for (int64_t i = kept; i < len; ++i) v[static_cast<size_t>(r * K + g0 + idx[static_cast<size_t>(i)])] = 0.0f;
      if (rng() % 2) {
        for (int64_t i = 0; i < kept; ++i) v[static_cast<size_t>(r * K + g0 + idx[static_cast<size_t>(i)])] *= -1.0f;
      }
    }
  }
  return Tensor::from_f32(v, {rows, K}, dtype);
}

std::vector<uint8_t> bytes_of(const TensorView& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data);
  return std::vector<uint8_t>(p, p + v.nbytes());
}

// Slide sizes straight from docs/design.md section 5, independent of SlideGeometry::make.
struct SlideSizes {
  int64_t K_pad, K_prime;
};
SlideSizes slide_sizes(Pattern p, int64_t K, int64_t align) {
  const int64_t two_n = p.group;
  const int64_t K_pad = (K + two_n - 1) / two_n * two_n;
  const int64_t raw = K_pad / two_n * 4 * (two_n / 2 - 1);
  return {K_pad, (raw + align - 1) / align * align};
}

TEST(Checkpoint, FormatNames) {
  for (const WeightFormat f : {WeightFormat::Dense, WeightFormat::Sparse24, WeightFormat::NM}) {
    auto parsed = parse_weight_format(weight_format_name(f));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, f);
  }
  EXPECT_EQ(weight_format_name(WeightFormat::Dense), "dense");
  EXPECT_EQ(weight_format_name(WeightFormat::Sparse24), "sparse24");
  EXPECT_EQ(weight_format_name(WeightFormat::NM), "nm");
  auto bad = parse_weight_format("csr");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "unknown format 'csr': expected dense, sparse24 or nm");
  EXPECT_EQ(record_key("model.layers.0.q_proj.weight"), "nmkit.model.layers.0.q_proj.weight");
  // --format names: the weight formats, and cutlass_sm80 = sparse24 in CUTLASS's SM80 layout.
  for (const char* name : {"dense", "sparse24", "nm", "cutlass_sm80"}) {
    auto stored = parse_stored_format(name);
    ASSERT_TRUE(stored.ok()) << name;
    EXPECT_EQ(stored_format_name(*stored), name);
  }
  EXPECT_EQ(parse_stored_format("cutlass_sm80")->format, WeightFormat::Sparse24);
  EXPECT_EQ(parse_stored_format("cutlass_sm80")->layout, StoredLayout::CutlassSm80);
  EXPECT_EQ(parse_stored_format("csr").error().message(),
            "unknown format 'csr': expected dense, sparse24, nm or cutlass_sm80");
}

TEST(Checkpoint, RecordSchemaIsTheDocumentedJson) {
  WeightRecord r;
  r.format = WeightFormat::Sparse24;
  r.pattern = Pattern{2, 4};
  r.dtype = DType::BF16;
  r.shape = {4, 16};
  EXPECT_EQ(encode_record(r), R"({"format":"sparse24","pattern":"2:4","dtype":"BF16","shape":[4,16]})");
}

void expect_same(const WeightRecord& a, const WeightRecord& b) {
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.pattern, b.pattern);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.shape, b.shape);
  ASSERT_EQ(a.slide.has_value(), b.slide.has_value());
  if (a.slide) {
    EXPECT_EQ(a.slide->pattern, b.slide->pattern);
    EXPECT_EQ(a.slide->N(), b.slide->N());
    EXPECT_EQ(a.slide->align, b.slide->align);
    EXPECT_EQ(a.slide->K, b.slide->K);
    EXPECT_EQ(a.slide->K_pad(), b.slide->K_pad());
    EXPECT_EQ(a.slide->K_prime(), b.slide->K_prime());
  }
}

TEST(Checkpoint, RecordsRoundTrip) {
  std::vector<WeightRecord> records;
  for (const auto& [format, pattern] : std::vector<std::pair<WeightFormat, Pattern>>{
           {WeightFormat::Dense, {2, 4}}, {WeightFormat::Dense, {6, 8}}, {WeightFormat::Sparse24, {2, 4}},
           {WeightFormat::NM, {3, 7}}, {WeightFormat::NM, {14, 16}}, {WeightFormat::NM, {1, 64}}}) {
    for (const DType dtype : {DType::F32, DType::F16, DType::BF16}) {
      WeightRecord r;
      r.format = format;
      r.pattern = pattern;
      r.dtype = dtype;
      r.shape = {17, 4097};
      records.push_back(r);
    }
  }
  // Slid weights: the record's pattern is 2:4 and its shape [rows, K_prime].
  for (const auto& [pattern, K, align] : std::vector<std::tuple<Pattern, int64_t, int>>{
           {{6, 8}, 100, 32}, {{4, 6}, 17, 16}, {{2, 4}, 3, 4}, {{8, 10}, 4097, 32}, {{1, 8}, 1, 32}}) {
    auto g = SlideGeometry::make(pattern, K, align);
    ASSERT_TRUE(g.ok()) << g.error().message();
    const SlideSizes expected = slide_sizes(pattern, K, align);
    EXPECT_EQ(g->K_pad(), expected.K_pad);
    EXPECT_EQ(g->K_prime(), expected.K_prime);
    for (const WeightFormat format : {WeightFormat::Dense, WeightFormat::Sparse24}) {
      WeightRecord r;
      r.format = format;
      r.pattern = Pattern{2, 4};
      r.dtype = DType::BF16;
      r.shape = {7, expected.K_prime};
      r.slide = *g;
      records.push_back(r);
    }
  }
  for (const WeightRecord& r : records) {
    const std::string json = encode_record(r);
    SCOPED_TRACE(json);
    auto decoded = decode_record("f.safetensors", "w", json);
    ASSERT_TRUE(decoded.ok()) << decoded.error().message();
    expect_same(*decoded, r);
    EXPECT_TRUE(is_record_value(json));
  }
  EXPECT_FALSE(is_record_value("random normal(0, 0.02)"));
  EXPECT_FALSE(is_record_value(""));
  EXPECT_TRUE(is_record_value("  {broken"));
}

TEST(Checkpoint, BadRecordsNameFileTensorAndValue) {
  const std::string prefix = "f.safetensors: tensor 'w': record 'nmkit.w': ";
  const std::string slide_ok =
      R"({"pattern":"6:8","N":4,"window":4,"stride":2,"windows_per_group":3,"K":100,"K_pad":104,"K_prime":160,"align":32})";
  const auto slid = [](const std::string& slide, const std::string& shape = "[3,160]") {
    return R"({"format":"dense","pattern":"2:4","dtype":"F32","shape":)" + shape + R"(,"slide":)" + slide + "}";
  };
  const auto replace = [&](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{bad", "not valid JSON"},
      {"[1]", "[1] is not a JSON object"},
      {R"({"format":"dense","pattern":"2:4","dtype":"F32","shape":[1,2],"colour":"red"})", "unknown field 'colour'"},
      {R"({"pattern":"2:4","dtype":"F32","shape":[1,2]})", "missing field \"format\""},
      {R"({"format":"csr","pattern":"2:4","dtype":"F32","shape":[1,2]})", "unknown format 'csr'"},
      {R"({"format":"nm","pattern":"4:2","dtype":"F32","shape":[1,2]})", "invalid pattern '4:2'"},
      {R"({"format":"nm","pattern":2,"dtype":"F32","shape":[1,2]})", "field \"pattern\" is 2, not a string"},
      {R"({"format":"sparse24","pattern":"4:8","dtype":"F32","shape":[1,2]})", "sparse24 with pattern 4:8"},
      {R"({"format":"nm","pattern":"2:4","dtype":"F33","shape":[1,2]})", "unknown dtype 'F33'"},
      {R"({"format":"nm","pattern":"2:4","dtype":"F32","shape":[1,2,3]})", "shape [1, 2, 3] is not [rows, K]"},
      {R"({"format":"nm","pattern":"2:4","dtype":"F32","shape":[-1,2]})", "shape [-1, 2] is not [rows, K]"},
      {R"({"format":"nm","pattern":"2:4","dtype":"F32","shape":[1,1e3]})", "shape [1, 1000.0] is not [rows, K]"},
      {R"({"format":"nm","pattern":"2:4","dtype":"F32"})", "missing field \"shape\""},
      {slid("[]"), "slide: [] is not an object"},
      {slid(replace(slide_ok, R"("K_prime":160)", R"("K_prime":128)")), "slide: field \"K_prime\" is 128 but pattern 6:8 with K 100 and align 32 gives 160"},
      {slid(replace(slide_ok, R"("K_pad":104)", R"("K_pad":100)")), "field \"K_pad\" is 100"},
      {slid(replace(slide_ok, R"("N":4)", R"("N":3)")), "field \"N\" is 3"},
      {slid(replace(slide_ok, R"("window":4)", R"("window":8)")), "field \"window\" is 8"},
      {slid(replace(slide_ok, R"("stride":2)", R"("stride":1)")), "field \"stride\" is 1"},
      {slid(replace(slide_ok, R"("windows_per_group":3)", R"("windows_per_group":2)")), "field \"windows_per_group\" is 2"},
      {slid(replace(slide_ok, R"("align":32)", R"("align":6)")), "slide: slide align 6"},
      {slid(replace(slide_ok, R"("pattern":"6:8")", R"("pattern":"7:8")")), "slide: pattern 7:8 cannot slide"},
      {slid(replace(slide_ok, R"("pattern":"6:8")", R"("pattern":"3:7")")), "slide: pattern 3:7 cannot slide"},
      {slid(replace(slide_ok, R"(,"align":32)", "")), "slide: missing field \"align\""},
      {slid(replace(slide_ok, R"("align":32)", R"("align":32,"extra":1)")), "slide: unknown field 'extra'"},
      {slid(replace(slide_ok, R"("K":100)", R"("K":-100)")), "field \"K\" is -100, not a non-negative integer"},
      {slid(slide_ok, "[3,100]"), "slid weight has shape [3, 100] but its K_prime is 160"},
      {replace(slid(slide_ok), R"("pattern":"2:4","dtype")", R"("pattern":"6:8","dtype")"), "slid weight has pattern 6:8"},
  };
  {
    auto good = decode_record("f.safetensors", "w", slid(slide_ok));
    ASSERT_TRUE(good.ok()) << good.error().message();
  }
  for (const auto& [json, expected] : cases) {
    auto decoded = decode_record("f.safetensors", "w", json);
    ASSERT_FALSE(decoded.ok()) << json;
    const std::string& message = decoded.error().message();
    EXPECT_EQ(message.rfind(prefix, 0), 0u) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// A checkpoint with every kind of stored tensor, written through the public API.
struct Fixture {
  test::TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Tensor embed = test::random_tensor(DType::F32, {5, 8}, 11);
  Tensor a = pruned_weight(DType::BF16, 3, 12, {2, 4}, 12);        // dense-masked with a record
  Tensor b = pruned_weight(DType::F16, 7, 17, {2, 4}, 13);         // sparse24, K % 4 != 0
  Tensor c = pruned_weight(DType::F32, 4, 17, {3, 7}, 14);         // nm, odd group and tail
  Tensor d = pruned_weight(DType::BF16, 3, 20, {6, 8}, 15);        // nm 6:8
  Tensor slid = pruned_weight(DType::F32, 2, 32, {2, 4}, 16);      // a slid 6:8 weight of K=16
  Tensor step = Tensor::zeros(DType::I64, {});

  Status write() {
    std::vector<OutputTensor> out;
    Metadata meta = {{"format", "pt"}, {"nmkit.generated", "random normal(0, 0.02)"}};
    out.push_back(OutputTensor::copy_of("embed", embed.view()));
    out.push_back(OutputTensor::copy_of("a", a.view()));
    meta[record_key("a")] = encode_record(WeightRecord{WeightFormat::Dense, {2, 4}, DType::BF16, {3, 12}, {}});
    auto pb = compress_sparse24(b.view(), "b");
    if (!pb.ok()) return pb.error();
    meta[record_key("b")] = encode_record(record_for(*pb));
    for (auto& t : packed_outputs("b", std::move(pb.value()))) out.push_back(std::move(t));
    out.push_back(OutputTensor::copy_of("step", step.view()));
    for (const auto& [name, tensor, pattern] : {std::tuple{"c", &c, Pattern{3, 7}}, std::tuple{"d", &d, Pattern{6, 8}}}) {
      auto p = compress_nm(tensor->view(), pattern, name);
      if (!p.ok()) return p.error();
      meta[record_key(name)] = encode_record(record_for(*p));
      for (auto& t : packed_outputs(name, std::move(p.value()))) out.push_back(std::move(t));
    }
    auto g = SlideGeometry::make({6, 8}, 16, 32);  // K_prime = ceil(2 * 12 / 32) * 32 = 32
    if (!g.ok()) return g.error();
    meta[record_key("slid")] = encode_record(WeightRecord{WeightFormat::Dense, {2, 4}, DType::F32, {2, 32}, *g});
    out.push_back(OutputTensor::copy_of("slid", slid.view()));
    return write_safetensors(path, out, meta);
  }
};

TEST(Checkpoint, PackedOutputsNameAndOrderTheParts) {
  Tensor w = pruned_weight(DType::F32, 3, 9, {2, 4}, 5);
  auto s = compress_sparse24(w.view(), "w");
  ASSERT_TRUE(s.ok()) << s.error().message();
  const std::vector<uint8_t> values = bytes_of(s->values.view()), meta = bytes_of(s->meta.view());
  auto parts = packed_outputs("w", std::move(s.value()));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "w.values");
  EXPECT_EQ(parts[0].dtype, DType::F32);
  EXPECT_EQ(parts[0].shape, (Shape{3, 6}));  // K_pad = 12
  EXPECT_EQ(parts[1].name, "w.meta");
  EXPECT_EQ(parts[1].dtype, DType::U8);
  EXPECT_EQ(parts[1].shape, (Shape{3, 2}));  // ceil(12/8)
  std::vector<uint8_t> got(values.size(), 0xEE);
  ASSERT_TRUE(parts[0].fill(reinterpret_cast<std::byte*>(got.data())).ok());
  EXPECT_EQ(got, values);
  got.assign(meta.size(), 0xEE);
  ASSERT_TRUE(parts[1].fill(reinterpret_cast<std::byte*>(got.data())).ok());
  EXPECT_EQ(got, meta);

  auto n = compress_nm(w.view(), {2, 4}, "w");
  ASSERT_TRUE(n.ok());
  auto nparts = packed_outputs("w", std::move(n.value()));
  ASSERT_EQ(nparts.size(), 2u);
  EXPECT_EQ(nparts[0].name, "w.values");
  EXPECT_EQ(nparts[1].name, "w.mask");
  EXPECT_EQ(nparts[1].shape, (Shape{3, 2}));
}

TEST(Checkpoint, ListAndLoadEveryKindOfTensor) {
  Fixture fx;
  ASSERT_TRUE(fx.write().ok());
  auto file = SafetensorsFile::open(fx.path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  auto stored = list_stored(*file);
  ASSERT_TRUE(stored.ok()) << stored.error().message();

  std::vector<std::string> names;
  for (const StoredTensor& s : *stored) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"embed", "a", "b", "step", "c", "d", "slid"}));
  const auto parts_of = [](const StoredTensor& s) {
    std::vector<std::string> p;
    for (const TensorInfo* t : s.parts) p.push_back(t->name);
    return p;
  };
  const auto& st = *stored;
  EXPECT_FALSE(st[0].record.has_value());
  EXPECT_FALSE(st[3].record.has_value());
  EXPECT_EQ(parts_of(st[2]), (std::vector<std::string>{"b.values", "b.meta"}));
  EXPECT_EQ(parts_of(st[4]), (std::vector<std::string>{"c.values", "c.mask"}));
  ASSERT_TRUE(st[2].record.has_value());
  EXPECT_EQ(st[2].record->format, WeightFormat::Sparse24);
  EXPECT_EQ(st[2].record->shape, (Shape{7, 17}));
  EXPECT_EQ(st[4].record->pattern, (Pattern{3, 7}));
  ASSERT_TRUE(st[6].record.has_value());
  ASSERT_TRUE(st[6].record->slide.has_value());
  EXPECT_EQ(st[6].record->slide->pattern, (Pattern{6, 8}));

  // Plain and dense tensors are views into the file; compressed ones decompress to the original.
  for (const auto& [index, original] : std::vector<std::pair<size_t, const Tensor*>>{
           {0, &fx.embed}, {1, &fx.a}, {3, &fx.step}, {6, &fx.slid}}) {
    auto loaded = load_weight(*file, st[index]);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message();
    ASSERT_TRUE(std::holds_alternative<TensorView>(*loaded)) << st[index].name;
    const TensorView& v = std::get<TensorView>(*loaded);
    EXPECT_EQ(v.data, file->view(*st[index].parts[0]).data) << "a view into the mapping, not a copy";
    EXPECT_EQ(v.shape, original->shape());
    EXPECT_EQ(bytes_of(v), bytes_of(original->view()));
  }
  auto lb = load_weight(*file, st[2]);
  ASSERT_TRUE(lb.ok()) << lb.error().message();
  ASSERT_TRUE(std::holds_alternative<Sparse24>(*lb));
  EXPECT_EQ(bytes_of(decompress(std::get<Sparse24>(*lb)).view()), bytes_of(fx.b.view()));
  for (const auto& [index, original] : std::vector<std::pair<size_t, const Tensor*>>{{4, &fx.c}, {5, &fx.d}}) {
    auto loaded = load_weight(*file, st[index]);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message();
    ASSERT_TRUE(std::holds_alternative<NMPacked>(*loaded));
    const NMPacked& p = std::get<NMPacked>(*loaded);
    EXPECT_EQ(p.pattern, st[index].record->pattern);
    EXPECT_EQ(bytes_of(decompress(p).view()), bytes_of(original->view()));
  }
}

// Writes `tensors` with `meta` and returns list_stored's error (failing when it succeeds).
std::string list_error(const test::TempDir& dir, std::vector<OutputTensor> tensors, const Metadata& meta) {
  const std::string path = dir.file("bad.safetensors");
  EXPECT_TRUE(write_safetensors(path, tensors, meta).ok());
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return "";
  auto stored = list_stored(*file);
  EXPECT_FALSE(stored.ok());
  if (stored.ok()) return "";
  const std::string& message = stored.error().message();
  EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  return message;
}

OutputTensor zeros_output(const std::string& name, DType dtype, Shape shape) {
  return OutputTensor::owning(name, Tensor::zeros(dtype, std::move(shape)));
}

std::string sparse24_record(const std::string& dtype, int64_t rows, int64_t K) {
  return R"({"format":"sparse24","pattern":"2:4","dtype":")" + dtype + R"(","shape":[)" + std::to_string(rows) + "," +
         std::to_string(K) + "]}";
}

#define EXPECT_HAS(message, piece) EXPECT_NE((message).find(piece), std::string::npos) << (message)

TEST(Checkpoint, RecordsThatDoNotMatchTheirPartsAreErrors) {
  test::TempDir dir;
  // b: [7, 17] F16 sparse24 -> values F16 [7, 10], meta U8 [7, 3].
  const Metadata meta = {{"nmkit.b", sparse24_record("F16", 7, 17)}};
  std::string m = list_error(dir, {zeros_output("b.values", DType::F16, {7, 10})}, meta);
  EXPECT_HAS(m, "tensor 'b': record says sparse24 but the file has no tensor 'b.meta'");

  m = list_error(dir, {zeros_output("b.values", DType::F16, {7, 10}), zeros_output("b.meta", DType::U8, {7, 2})}, meta);
  EXPECT_HAS(m, "tensor 'b.meta': U8 [7, 2] does not match the sparse24 record of 'b' (F16 [7, 17] 2:4 needs U8 [7, 3])");

  m = list_error(dir, {zeros_output("b.values", DType::F32, {7, 10}), zeros_output("b.meta", DType::U8, {7, 3})}, meta);
  EXPECT_HAS(m, "tensor 'b.values': F32 [7, 10] does not match");

  m = list_error(dir, {zeros_output("b", DType::F16, {7, 17}), zeros_output("b.values", DType::F16, {7, 10}),
                       zeros_output("b.meta", DType::U8, {7, 3})},
                 meta);
  EXPECT_HAS(m, "tensor 'b': stored both plain and as sparse24 parts");

  m = list_error(dir, {zeros_output("w", DType::F32, {2, 4})}, {{"nmkit.w", "{not json"}});
  EXPECT_HAS(m, "tensor 'w': record 'nmkit.w': not valid JSON");

  m = list_error(dir, {zeros_output("w", DType::F32, {2, 4})},
                 {{"nmkit.w", R"({"format":"dense","pattern":"2:4","dtype":"F32","shape":[2,8]})"}});
  EXPECT_HAS(m, "tensor 'w': F32 [2, 4] does not match the dense record of 'w'");

  m = list_error(dir, {zeros_output("ghost.other", DType::F32, {1})},
                 {{"nmkit.ghost", R"({"format":"dense","pattern":"2:4","dtype":"F32","shape":[1,1]})"}});
  EXPECT_HAS(m, "tensor 'ghost': record says dense but the file has no tensor 'ghost'");

  // Two records that claim the same file tensor.
  m = list_error(dir,
                 {zeros_output("x.values", DType::F32, {1, 2}), zeros_output("x.mask", DType::U8, {1, 1})},
                 {{"nmkit.x", R"({"format":"nm","pattern":"2:4","dtype":"F32","shape":[1,4]})"},
                  {"nmkit.x.values", R"({"format":"dense","pattern":"2:4","dtype":"F32","shape":[1,2]})"}});
  EXPECT_HAS(m, "tensor 'x.values': claimed by the records of both 'x' and 'x.values'");
}

TEST(Checkpoint, LoadWeightValidatesPackedContents) {
  test::TempDir dir;
  const std::string path = dir.file("corrupt.safetensors");
  // meta nibble 0 is never valid (docs/design.md 4.2).
  ASSERT_TRUE(write_safetensors(path,
                                {zeros_output("b.values", DType::F16, {7, 10}), zeros_output("b.meta", DType::U8, {7, 3})},
                                {{"nmkit.b", sparse24_record("F16", 7, 17)}})
                  .ok());
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok());
  auto stored = list_stored(*file);
  ASSERT_TRUE(stored.ok()) << stored.error().message();
  ASSERT_EQ(stored->size(), 1u);
  auto loaded = load_weight(*file, (*stored)[0]);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().message().rfind(path + ": ", 0), 0u) << loaded.error().message();
  EXPECT_HAS(loaded.error().message(), "'b'");
  EXPECT_HAS(loaded.error().message(), "invalid metadata nibble 0");

  // A StoredTensor assembled by hand must still match its record.
  StoredTensor wrong = (*stored)[0];
  std::swap(wrong.parts[0], wrong.parts[1]);
  auto mismatched = load_weight(*file, wrong);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_HAS(mismatched.error().message(), "tensor 'b': its parts are not the sparse24 parts its record names");
  StoredTensor plain{"b.meta", std::nullopt, {}};
  auto empty = load_weight(*file, plain);
  ASSERT_FALSE(empty.ok());
  EXPECT_HAS(empty.error().message(), "a plain tensor has exactly one part, not 0");
}

}  // namespace
}  // namespace nmkit
