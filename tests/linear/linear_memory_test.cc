// One copy of each weight (docs/design.md 14): a dense layer reads rows it does not own in place and
// computes what the same weight packed from a copy computes, bit for bit; no call of any size adds a
// second form of the weight (resident bytes stay the packed form's, and the process does not grow by
// a copy); and a token's outputs do not depend on its place in a call, whichever route runs it.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/linear.h"
#include "nmkit/slide.h"
#include "tests/util/random.h"

namespace nmkit::test {
namespace {

bool tier_available() { return active_tier().ok(); }

// A [rows, K] weight of `dtype` whose rows start `offset` elements into their own allocation (rows
// that are not 64-byte aligned, as in a file mapping).
struct Part {
  std::shared_ptr<std::vector<std::byte>> bytes;
  TensorView view;
};

Part make_part(DType dtype, int64_t rows, int64_t K, int64_t offset, uint64_t seed) {
  const Tensor t = random_tensor(dtype, {rows, K}, seed);
  const size_t size = dtype_size(dtype);
  auto bytes = std::make_shared<std::vector<std::byte>>(static_cast<size_t>(rows * K + offset) * size);
  std::memcpy(bytes->data() + static_cast<size_t>(offset) * size, t.data(), static_cast<size_t>(rows * K) * size);
  return {bytes, TensorView{dtype, {rows, K}, bytes->data() + static_cast<size_t>(offset) * size}};
}

Tensor stack(const std::vector<TensorView>& parts) {
  int64_t rows = 0;
  for (const TensorView& p : parts) rows += p.rows();
  Tensor out = Tensor::empty(parts[0].dtype, {rows, parts[0].cols()});
  size_t at = 0;
  for (const TensorView& p : parts) {
    const size_t n = static_cast<size_t>(p.numel()) * dtype_size(p.dtype);
    std::memcpy(out.data() + at, p.data, n);
    at += n;
  }
  return out;
}

// w with keep:group kept at positions that shift from row to row (which ones does not matter here).
Tensor pruned(const Tensor& w, Pattern pattern) {
  std::vector<float> v = w.to_f32();
  const int64_t K = w.cols();
  for (int64_t r = 0; r < w.rows(); ++r) {
    for (int64_t k = 0; k < K; ++k) {
      if ((k + r) % pattern.group >= pattern.keep) v[static_cast<size_t>(r * K + k)] = 0.0f;
    }
  }
  return Tensor::from_f32(v, {w.rows(), K});
}

std::vector<float> apply(const SparseLinear& layer, const Tensor& x) {
  std::vector<float> y(static_cast<size_t>(x.rows() * layer.rows()), std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(layer.apply(x.as<float>(), x.rows(), y.data()).ok());
  return y;
}

// Parts of 3, 5 and 1 rows (blocks of 4 rows straddle them) at unaligned starts, K with and without a
// tail of the 32-wide steps, every route the plan takes from 1 to 300 tokens, oneDNN's and nmkit's
// own: the in-place layer equals the layer packed from the stacked copy bit for bit. The owner is
// held (the caller's handles are dropped first), and the layer reads the parts where they lie (a
// weight changed after building changes its outputs).
TEST(LinearMemory, DenseInPlaceEqualsPackedBitForBit) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  uint64_t seed = 12000;
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const int64_t K : {1, 17, 200, 576}) {
      for (bool bf16_x : {false, true}) {
        for (bool onednn : {true, false}) {
          ++seed;
          SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " K=" << K << " bf16_x=" << bf16_x << " onednn=" << onednn
                                          << " " << seed_trace(seed));
          std::vector<Part> parts{make_part(dtype, 3, K, 1, seed), make_part(dtype, 5, K, 3, seed + 1),
                                  make_part(dtype, 1, K, 0, seed + 2)};
          std::vector<TensorView> views;
          for (const Part& p : parts) views.push_back(p.view);
          LinearOptions options;
          options.onednn = onednn;
          options.bf16_activations = bf16_x;
          const Tensor stacked = stack(views);
          auto packed = SparseLinear::dense(stacked.view(), options);
          ASSERT_TRUE(packed.ok()) << packed.error().message();
          auto owner = std::make_shared<std::vector<Part>>(parts);
          auto in_place = SparseLinear::dense(views, owner, options);
          ASSERT_TRUE(in_place.ok()) << in_place.error().message();
          owner.reset();
          parts.clear();  // the layer's owner alone keeps the parts' memory now
          EXPECT_EQ(in_place->borrowed_bytes(), static_cast<size_t>(9 * K) * dtype_size(dtype));
          EXPECT_EQ(in_place->resident_bytes(), in_place->borrowed_bytes());
          EXPECT_EQ(packed->borrowed_bytes(), 0u);
          EXPECT_EQ(packed->resident_bytes(), in_place->borrowed_bytes());
          EXPECT_EQ(in_place->bytes_streamed(), packed->bytes_streamed());
          for (const int64_t M : {1, 2, 3, 5, 16, 17, 64, 300}) {
            const Tensor x = random_tensor(DType::F32, {M, K}, seed + static_cast<uint64_t>(M));
            EXPECT_EQ(in_place->kernel_name(M), packed->kernel_name(M));
            const std::vector<float> a = apply(*packed, x), b = apply(*in_place, x);
            EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "M=" << M << " " << in_place->kernel_name(M);
          }
          // Read in place: the first weight of part 1 (row 3) changed, row 3's outputs change.
          std::byte* first = const_cast<std::byte*>(views[1].data);
          std::memset(first, 0x40, dtype_size(dtype));  // 3.0 (bf16) or 3.004 (f32): outside the random range
          const Tensor x = random_tensor(DType::F32, {1, K}, seed + 999, 1.0f, 2.0f);
          const std::vector<float> a = apply(*packed, x), b = apply(*in_place, x);
          EXPECT_NE(a[3], b[3]) << "the in-place layer did not see its weight change";
        }
      }
    }
  }
}

// Stacked parts converted by the layer (f16 widened, INT8 quantized per row) equal the stacked weight
// packed the same way; the owner is not held then.
TEST(LinearMemory, ConvertedPartsEqualTheStackedWeight) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const int64_t K = 100;
  for (bool int8 : {false, true}) {
    SCOPED_TRACE(int8 ? "int8" : "f16");
    const DType dtype = int8 ? DType::F32 : DType::F16;
    const std::vector<Part> parts{make_part(dtype, 7, K, 1, 300), make_part(dtype, 2, K, 0, 301)};
    const std::vector<TensorView> views{parts[0].view, parts[1].view};
    LinearOptions options;
    options.int8 = int8;
    auto owner = std::make_shared<int>(0);
    auto converted = SparseLinear::dense(views, owner, options);
    ASSERT_TRUE(converted.ok()) << converted.error().message();
    EXPECT_EQ(owner.use_count(), 1);
    EXPECT_EQ(converted->borrowed_bytes(), 0u);
    auto packed = SparseLinear::dense(stack(views).view(), options);
    ASSERT_TRUE(packed.ok());
    for (const int64_t M : {1, 64}) {
      const Tensor x = random_tensor(DType::F32, {M, K}, 302);
      const std::vector<float> a = apply(*packed, x), b = apply(*converted, x);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "M=" << M;
    }
  }
  const std::vector<Part> mixed{make_part(DType::F32, 2, K, 0, 303), make_part(DType::BF16, 2, K, 0, 304)};
  EXPECT_FALSE(SparseLinear::dense({mixed[0].view, mixed[1].view}, nullptr).ok());
  const std::vector<Part> widths{make_part(DType::F32, 2, K, 0, 305), make_part(DType::F32, 2, K + 1, 0, 306)};
  EXPECT_FALSE(SparseLinear::dense({widths[0].view, widths[1].view}, nullptr).ok());
  EXPECT_FALSE(SparseLinear::dense(std::vector<TensorView>{}, nullptr).ok());
}

// The process's resident set (/proc/self/statm).
size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

struct FormCase {
  std::string name;
  std::function<Result<SparseLinear>()> make;
};

// Every form at 2048 x 2048 (a dense copy would take 4 MiB as INT8, 8 as bf16, 16 as f32): after
// calls of every size, and so of every route the plan takes (rows, token lanes, slabs, tiles, panels
// under oneDNN), the layer holds the bytes it held when built, and the process did not grow by half
// such a copy. The calling threads' scratch is warmed first by a twin layer, so that growth would be
// the measured layer's own (as the forms the first large call used to build for a layer were).
TEST(LinearMemory, NoCallAddsASecondFormOfTheWeight) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  if (*active_tier() != detected_tier()) GTEST_SKIP() << "the plan's own tier only (a memory check, not a kernel's)";
  // Large blocks from their own mappings, returned when freed: glibc otherwise raises its mapping
  // threshold after the first such free and serves later blocks from pages it already holds, which
  // would hide a new block from the RSS.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  const int64_t rows = 2048, K = 2048;
  const Tensor w = random_tensor(DType::F32, {rows, K}, 4100);
  const Tensor w24 = pruned(w, {2, 4}), w68 = pruned(w, {6, 8});
  const Tensor w24_bf16 = Tensor::from_f32(w24.to_f32(), {rows, K}, DType::BF16);
  const Tensor w68_bf16 = Tensor::from_f32(w68.to_f32(), {rows, K}, DType::BF16);
  auto sparse24 = compress_sparse24(w24.view(), "w");
  auto sparse24_bf16 = compress_sparse24(w24_bf16.view(), "w");
  auto nm68 = compress_nm(w68.view(), {6, 8}, "w");
  auto nm68_bf16 = compress_nm(w68_bf16.view(), {6, 8}, "w");
  auto slid = nmkit::slide(w68.view(), Pattern{6, 8}, 32, "w");
  ASSERT_TRUE(sparse24.ok() && sparse24_bf16.ok() && nm68.ok() && nm68_bf16.ok() && slid.ok());
  LinearOptions int8, bf16x;
  int8.int8 = true;
  bf16x.bf16_activations = true;
  const std::vector<FormCase> forms{
      {"dense f32", [&] { return SparseLinear::dense(w.view()); }},
      {"dense bf16 x", [&] { return SparseLinear::dense(w24_bf16.view(), bf16x); }},
      {"dense int8", [&] { return SparseLinear::dense(w.view(), int8); }},
      {"sparse24 f32", [&] { return SparseLinear::sparse24(*sparse24); }},
      {"sparse24 bf16", [&] { return SparseLinear::sparse24(*sparse24_bf16); }},
      {"sparse24 bf16 x", [&] { return SparseLinear::sparse24(*sparse24_bf16, bf16x); }},
      {"sparse24 int8", [&] { return SparseLinear::sparse24(*sparse24, int8); }},
      {"nm 6:8 f32", [&] { return SparseLinear::nm(*nm68); }},
      {"nm 6:8 bf16 x", [&] { return SparseLinear::nm(*nm68_bf16, bf16x); }},
      {"slid 6:8 int8", [&] { return SparseLinear::slid(slid->weight.view(), slid->geometry); }},
  };
  for (const FormCase& form : forms) {
    SCOPED_TRACE(form.name);
    auto twin = form.make();
    auto layer = form.make();
    ASSERT_TRUE(twin.ok() && layer.ok());
    const size_t held = layer->resident_bytes();
    EXPECT_GE(held, layer->bytes_streamed());
    EXPECT_LE(held, layer->bytes_streamed() + static_cast<size_t>(slid->geometry.K_prime()) * 4);  // + a lift map
    const std::vector<int64_t> sizes{1, 4, 8, 16, 64, 256};
    for (const int64_t M : sizes) apply(*twin, random_tensor(DType::F32, {M, K}, 4101));
    const size_t before = rss_bytes();
    std::string routes;
    for (const int64_t M : sizes) {
      apply(*layer, random_tensor(DType::F32, {M, K}, 4102));
      routes += ", ";
      routes += layer->kernel_name(M);
    }
    EXPECT_EQ(layer->resident_bytes(), held) << routes;
    // A copy in the GEMM's type would add at least rows * K bytes (INT8).
    EXPECT_LT(rss_bytes(), before + static_cast<size_t>(rows * K) / 2) << routes;
  }
}

// The same token at the first, a middle and the last place of a call gives the same outputs, bit
// for bit, on every route (oneDNN's GEMM included: its kernels for the tail of the token dimension
// must sum as the others do), with oneDNN and with nmkit's own kernels.
TEST(LinearMemory, TokenOutputsDoNotDependOnTheirPlaceInTheCall) {
  if (!tier_available()) GTEST_SKIP() << "tier not supported here";
  const int64_t rows = 37, K = 300;
  const Tensor w = random_tensor(DType::F32, {rows, K}, 4200);
  const Tensor w24 = pruned(w, {2, 4}), w68 = pruned(w, {6, 8});
  const Tensor w_bf16 = Tensor::from_f32(w24.to_f32(), {rows, K}, DType::BF16);
  auto sparse24 = compress_sparse24(w24.view(), "w");
  auto sparse24_bf16 = compress_sparse24(w_bf16.view(), "w");
  auto nm68 = compress_nm(w68.view(), {6, 8}, "w");
  auto slid = nmkit::slide(w68.view(), Pattern{6, 8}, 32, "w");
  ASSERT_TRUE(sparse24.ok() && sparse24_bf16.ok() && nm68.ok() && slid.ok());
  for (bool onednn : {true, false}) {
    LinearOptions plain, int8, bf16x;
    plain.onednn = int8.onednn = bf16x.onednn = onednn;
    int8.int8 = true;
    bf16x.bf16_activations = true;
    const std::vector<FormCase> forms{
        {"dense f32", [&] { return SparseLinear::dense(w.view(), plain); }},
        {"dense bf16 x", [&] { return SparseLinear::dense(w_bf16.view(), bf16x); }},
        {"dense int8", [&] { return SparseLinear::dense(w.view(), int8); }},
        {"sparse24 f32", [&] { return SparseLinear::sparse24(*sparse24, plain); }},
        {"sparse24 bf16 x", [&] { return SparseLinear::sparse24(*sparse24_bf16, bf16x); }},
        {"sparse24 int8", [&] { return SparseLinear::sparse24(*sparse24, int8); }},
        {"nm 6:8 f32", [&] { return SparseLinear::nm(*nm68, plain); }},
        {"slid 6:8 int8", [&] { return SparseLinear::slid(slid->weight.view(), slid->geometry, int8); }},
    };
    for (const FormCase& form : forms) {
      auto layer = form.make();
      ASSERT_TRUE(layer.ok()) << layer.error().message();
      for (const int64_t M : {5, 17, 64, 300}) {
        SCOPED_TRACE(testing::Message() << form.name << " M=" << M << " " << layer->kernel_name(M));
        Tensor x = random_tensor(DType::F32, {M, K}, 4201 + static_cast<uint64_t>(M));
        for (const int64_t m : {M / 2, M - 1}) std::memcpy(x.as<float>() + m * K, x.as<float>(), static_cast<size_t>(K) * 4);
        const std::vector<float> y = apply(*layer, x);
        EXPECT_NE(y[0], 0.0f);
        for (const int64_t m : {M / 2, M - 1}) {
          EXPECT_EQ(std::memcmp(y.data(), y.data() + m * rows, static_cast<size_t>(rows) * 4), 0) << "token at " << m;
        }
      }
    }
  }
}

}  // namespace
}  // namespace nmkit::test
