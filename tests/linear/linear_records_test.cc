// A layer read back from its stored records (src/linear/linear_records.h; docs/design.md 11.9) runs
// as the layer they came from, bit for bit, on every form: dense, sparse24 and nm in f32, bf16 and
// INT8, slid INT8, an nm weight the tier runs slid, with a bias; awkward shapes. And every way the
// records can be wrong is an Error naming the layer and what is wrong, before a kernel reads them.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/linear.h"
#include "nmkit/prune.h"
#include "nmkit/slide.h"
#include "src/cpu/linear_kernels.h"
#include "src/linear/linear_records.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

using linear::kRecordArrays;

// Records written as a file would hold them: each array in a 64-byte aligned buffer of its own.
struct Written {
  std::vector<int32_t> header;
  std::vector<cpu::AlignedBytes> arrays;

  linear::StoredRecords stored() const {
    linear::StoredRecords r;
    r.header = header;
    for (int a = 0; a < kRecordArrays; ++a) r.arrays[a] = {arrays[a].data.get(), arrays[a].size};
    return r;
  }
};

Written write(const SparseLinear& layer) {
  auto records = linear::records_of(layer);
  EXPECT_TRUE(records.ok()) << records.error().message();
  Written out;
  out.header = records->header;
  for (int a = 0; a < kRecordArrays; ++a) {
    const linear::StoredArray& array = records->arrays[a];
    out.arrays.push_back(cpu::AlignedBytes::zeros(array.bytes));
    if (array.bytes > 0) array.write(out.arrays.back().data.get());
  }
  return out;
}

Result<SparseLinear> read(const Written& w, const LinearOptions& options = {}) {
  return linear::layer_from_records(w.stored(), nullptr, options, "blk.0.test");
}

// Y of both layers on random X of several token counts (one token, the decode kernels; many, the
// tiles, slabs or oneDNN routes), equal bit for bit.
void expect_same_outputs(const SparseLinear& want, const SparseLinear& got, int64_t K) {
  EXPECT_EQ(want.kernel_name(), got.kernel_name());
  EXPECT_EQ(want.bytes_streamed(), got.bytes_streamed());
  for (const int64_t M : {1, 5, 40}) {
    const Tensor x = test::random_tensor(DType::F32, {M, K}, static_cast<uint64_t>(M * 7 + K));
    auto a = want.apply(x.view());
    auto b = got.apply(x.view());
    ASSERT_TRUE(a.ok() && b.ok());
    for (int64_t i = 0; i < a->numel(); ++i) {
      ASSERT_EQ(a->as<float>()[i], b->as<float>()[i]) << "M = " << M << ", output " << i;
    }
  }
}

struct Form {
  std::string name;
  std::function<Result<SparseLinear>(const Tensor& w)> make;
};

Result<SparseLinear> pruned_nm(const Tensor& w, Pattern pattern, bool int8) {
  auto pruned = prune(w.view(), pattern, PruneMethod::Magnitude, {}, "w");
  if (!pruned.ok()) return pruned.error();
  auto nm = compress_nm(pruned->pruned.view(), pattern, "w");
  if (!nm.ok()) return nm.error();
  LinearOptions o;
  o.int8 = int8;
  return SparseLinear::nm(*nm, o);
}

Result<SparseLinear> pruned_24(const Tensor& w, bool int8) {
  auto pruned = prune(w.view(), Pattern{2, 4}, PruneMethod::Magnitude, {}, "w");
  if (!pruned.ok()) return pruned.error();
  auto packed = compress_sparse24(pruned->pruned.view(), "w");
  if (!packed.ok()) return packed.error();
  LinearOptions o;
  o.int8 = int8;
  return SparseLinear::sparse24(*packed, o);
}

std::vector<Form> forms() {
  std::vector<Form> out;
  for (const bool int8 : {false, true}) {
    const std::string dt = int8 ? "int8 " : "";
    out.push_back({dt + "dense", [int8](const Tensor& w) {
                     LinearOptions o;
                     o.int8 = int8;
                     return SparseLinear::dense(w.view(), o);
                   }});
    out.push_back({dt + "sparse24", [int8](const Tensor& w) { return pruned_24(w, int8); }});
    for (const Pattern p : {Pattern{6, 8}, Pattern{3, 7}, Pattern{5, 16}, Pattern{1, 4}}) {
      out.push_back({dt + "nm " + p.str(), [int8, p](const Tensor& w) { return pruned_nm(w, p, int8); }});
    }
  }
  out.push_back({"int8 slid 6:8", [](const Tensor& w) -> Result<SparseLinear> {
                   auto pruned = prune(w.view(), Pattern{6, 8}, PruneMethod::Magnitude, {}, "w");
                   if (!pruned.ok()) return pruned.error();
                   auto slid = slide(pruned->pruned.view(), Pattern{6, 8});
                   if (!slid.ok()) return slid.error();
                   return SparseLinear::slid(slid->weight.view(), slid->geometry);
                 }});
  out.push_back({"dense with bias", [](const Tensor& w) -> Result<SparseLinear> {
                   auto layer = SparseLinear::dense(w.view());
                   if (!layer.ok()) return layer;
                   const Tensor bias = test::random_tensor(DType::F32, {w.rows()}, 3);
                   NMKIT_TRY(layer->set_bias(bias.view()));
                   return layer;
                 }});
  return out;
}

TEST(LinearRecords, EveryFormRunsFromItsRecordsAsItRanBitForBit) {
  for (const DType dtype : {DType::F32, DType::BF16}) {
    for (const auto& [rows, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 8}, {7, 72}, {37, 200}, {130, 1000}}) {
      const Tensor w = test::random_tensor(dtype, {rows, K}, static_cast<uint64_t>(rows * 131 + K));
      for (const Form& form : forms()) {
        SCOPED_TRACE(form.name + " " + std::string(dtype_name(dtype)) + " " + std::to_string(rows) + " x " + std::to_string(K));
        auto want = form.make(w);
        ASSERT_TRUE(want.ok()) << want.error().message();
        const Written written = write(*want);
        auto got = read(written);
        ASSERT_TRUE(got.ok()) << got.error().message();
        expect_same_outputs(*want, *got, K);
        // Records of a layer read from records are the same records.
        const Written again = write(*got);
        EXPECT_EQ(again.header, written.header);
        for (int a = 0; a < kRecordArrays; ++a) {
          ASSERT_EQ(again.arrays[a].size, written.arrays[a].size) << linear::record_array_name(a);
          EXPECT_EQ(std::memcmp(again.arrays[a].data.get(), written.arrays[a].data.get(), written.arrays[a].size), 0);
        }
      }
    }
  }
}

// A dense layer reading a file's rows in place (stacked parts) stores them one after another.
TEST(LinearRecords, InPlaceRowsAreStoredStacked) {
  const Tensor q = test::random_tensor(DType::BF16, {12, 96}, 1), k = test::random_tensor(DType::BF16, {4, 96}, 2);
  auto want = SparseLinear::dense({q.view(), k.view()}, nullptr);
  ASSERT_TRUE(want.ok());
  const Written written = write(*want);  // the layer reads these bytes: they outlive it
  auto got = read(written);
  ASSERT_TRUE(got.ok()) << got.error().message();
  expect_same_outputs(*want, *got, 96);
}

std::string error_of(const Written& w) {
  auto got = read(w);
  return got.ok() ? std::string("(no error)") : got.error().message();
}

TEST(LinearRecords, BadRecordsAreErrorsNamingTheLayer) {
  const Tensor w = test::random_tensor(DType::F32, {37, 200}, 5);
  auto nm = pruned_nm(w, Pattern{6, 8}, true);
  ASSERT_TRUE(nm.ok());
  const Written good = write(*nm);
  ASSERT_TRUE(read(good).ok());

  Written bad_version = write(*nm);
  bad_version.header[0] = 2;
  EXPECT_NE(error_of(bad_version).find("blk.0.test: record header field version = 2"), std::string::npos) << error_of(bad_version);

  Written short_header = write(*nm);
  short_header.header.pop_back();
  EXPECT_NE(error_of(short_header).find("fields"), std::string::npos);

  Written wider = write(*nm);
  wider.header[4] += 64;  // stored and logical K: the arrays no longer match the layout
  wider.header[10] += 64;
  EXPECT_NE(error_of(wider).find("blk.0.test: values holds"), std::string::npos) << error_of(wider);

  Written logical_k = write(*nm);
  logical_k.header[10] += 1;  // logical K differs from the stored rows' width without a slide
  EXPECT_NE(error_of(logical_k).find("record header field K = 201"), std::string::npos) << error_of(logical_k);

  Written bad_pattern = write(*nm);
  bad_pattern.header[5] = 9;  // keep > group
  EXPECT_NE(error_of(bad_pattern).find("keep:group"), std::string::npos) << error_of(bad_pattern);

  Written truncated = write(*nm);
  truncated.arrays[1].size -= 64;
  EXPECT_NE(error_of(truncated).find("meta holds"), std::string::npos) << error_of(truncated);

  Written extra_bits = write(*nm);
  extra_bits.arrays[1].data[8 * 5] = std::byte{0xFF};  // record 5 (row 1, 2nd superchunk): 8 of 6 kept
  EXPECT_NE(error_of(extra_bits).find("has more bits than 6:8 keeps"), std::string::npos) << error_of(extra_bits);

  Written padding_bits = write(*nm);
  // Row 37 is padding in the last row block (rows 36-39): no bits allowed.
  const int64_t superchunks = 256 / 64, record = (9 * superchunks + 0) * 4 + 1;
  padding_bits.arrays[1].data[record * 8] = std::byte{1};
  EXPECT_NE(error_of(padding_bits).find("mask of row 37"), std::string::npos) << error_of(padding_bits);

  // f32 4:8 (not run slid): records of 4 mask bytes, two to a word in the check; each half counts.
  auto nm48 = pruned_nm(w, Pattern{4, 8}, false);
  ASSERT_TRUE(nm48.ok());
  for (const int row : {1, 2}) {
    Written extra = write(*nm48);
    ASSERT_EQ(extra.header[1], 2);  // nm records, 4 mask bytes a record (superchunks of 32 K)
    extra.arrays[1].data[(1 * 4 + row) * 4] = std::byte{0xFF};  // row block 0, superchunk 1: record 4 + row
    EXPECT_NE(error_of(extra).find("mask of row " + std::to_string(row) + ", K 32-63 has more bits than 4:8 keeps"),
              std::string::npos)
        << error_of(extra);
  }

  Written nan_scale = write(*nm);
  const float nan = std::nanf("");
  std::memcpy(nan_scale.arrays[2].data.get() + 4 * 3, &nan, 4);
  EXPECT_NE(error_of(nan_scale).find("scale of row 3 is nan"), std::string::npos) << error_of(nan_scale);

  Written misaligned = write(*nm);
  misaligned.arrays[0].data = cpu::AlignedBytes::zeros(misaligned.arrays[0].size + 64).data;
  linear::StoredRecords shifted = misaligned.stored();
  shifted.arrays[0] = {misaligned.arrays[0].data.get() + 8, misaligned.arrays[0].size};
  auto got = linear::layer_from_records(shifted, nullptr, {}, "blk.0.test");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message().find("values is not 64-byte aligned"), std::string::npos) << got.error().message();
}

}  // namespace
}  // namespace nmkit
