// The host-side padding of CudaSparseLinear's weights (src/cuda/weight_padding.h): the widened
// sparse24 decompresses to the weight with zero columns appended, validates as a cutlass_sm80
// layout of whole 128-K tiles, and the widened codes keep every row's bytes with zero rows and
// columns added.
#include <gtest/gtest.h>

#include <cstring>

#include "cuda/weight_padding.h"
#include "nmkit/cutlass_sm80.h"
#include "nmkit/prune.h"
#include "nmkit/quant.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

TEST(WeightPadding, WidenedSparse24IsTheWeightWithZeroColumns) {
  for (const int64_t K : {1, 3, 17, 100, 128, 129}) {
    SCOPED_TRACE("K " + std::to_string(K));
    auto pruned = prune(test::random_tensor(DType::F32, {16, K}, static_cast<uint64_t>(K)).view(), {2, 4},
                        PruneMethod::Magnitude);
    ASSERT_TRUE(pruned.ok());
    auto s = compress_sparse24(pruned->pruned.view());
    ASSERT_TRUE(s.ok());
    auto q = quantize_weights(*s, QuantType::Int8);
    ASSERT_TRUE(q.ok());
    const int64_t K_new = (K + 127) / 128 * 128;
    const Sparse24 wide = cuda::pad_sparse24(q->packed, K_new);
    const Tensor narrow_dense = decompress(q->packed), wide_dense = decompress(wide);
    int64_t nonzero = 0;
    for (int64_t r = 0; r < 16; ++r) {
      for (int64_t k = 0; k < K_new; ++k) {
        const uint8_t want = k < K ? narrow_dense.as<uint8_t>()[r * K + k] : 0;
        ASSERT_EQ(wide_dense.as<uint8_t>()[r * K_new + k], want) << "row " << r << ", column " << k;
        nonzero += want != 0;
      }
    }
    EXPECT_GT(nonzero, 0);
    auto layout = to_cutlass_sm80(wide, "w");
    ASSERT_TRUE(layout.ok()) << layout.error().message();
    EXPECT_EQ(layout->K_pad(), K_new);
    const Status valid = validate(*layout, "w");
    EXPECT_TRUE(valid.ok()) << valid.error().message();

    const Tensor codes = cuda::pad_codes(narrow_dense, K_new, 32);
    ASSERT_EQ(codes.shape(), (Shape{32, K_new}));
    for (int64_t r = 0; r < 32; ++r) {
      for (int64_t k = 0; k < K_new; ++k) {
        const uint8_t want = r < 16 && k < K ? narrow_dense.as<uint8_t>()[r * K + k] : 0;
        ASSERT_EQ(codes.as<uint8_t>()[r * K_new + k], want) << "row " << r << ", column " << k;
      }
    }
  }
}

}  // namespace
}  // namespace nmkit
