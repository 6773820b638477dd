// LlamaModel::build refuses a model that cannot fit before it reads a tensor (issue 25, bad input:
// "a model larger than memory: say so before loading, needed vs available").
#include <gtest/gtest.h>

#include "nmkit/model.h"

namespace nmkit {
namespace {

LlamaParams huge_params() {  // an 8B-like model with 4096 blocks: about 900 billion weights
  LlamaParams p;
  p.n_vocab = 49152;
  p.n_embd = 4096;
  p.n_layer = 4096;
  p.n_head = 32;
  p.n_head_kv = 8;
  p.n_ff = 14336;
  p.n_ctx_train = 4096;
  return p;
}

TEST(MemoryPreflight, ModelLargerThanMemoryIsRefusedBeforeLoading) {
  int loads = 0;
  TensorLoader load = [&](const std::string& name) -> Result<Tensor> {
    ++loads;
    return Error("loader called for " + name);
  };
  for (DType weights : {DType::F32, DType::BF16, DType::I8}) {
    ModelOptions options;
    options.weights = weights;
    auto model = LlamaModel::build(huge_params(), load, options);
    ASSERT_FALSE(model.ok());
    const std::string& message = model.error().message();
    EXPECT_NE(message.find(" form needs "), std::string::npos) << message;
    EXPECT_NE(message.find(" GB available"), std::string::npos) << message;
  }
  EXPECT_EQ(loads, 0);
}

TEST(MemoryPreflight, EstimateCountsEachFormsBytes) {
  LlamaParams p = huge_params();
  p.n_layer = 2;
  ModelOptions f32, bf16, int8, s24;
  f32.weights = DType::F32;
  bf16.weights = DType::BF16;
  int8.weights = DType::I8;
  s24.weights = DType::BF16;
  s24.pattern = Pattern{2, 4};
  s24.format = LinearFormat::Sparse24;
  const double weights = 49152.0 * 4096 + 2 * (4096.0 * 128 * (2 * 32 + 2 * 8) + 3 * 4096.0 * 14336);
  EXPECT_NEAR(static_cast<double>(LlamaModel::estimate_bytes(p, f32)), 4 * weights, 0.001 * 4 * weights);
  EXPECT_NEAR(static_cast<double>(LlamaModel::estimate_bytes(p, bf16)), 2 * weights, 0.001 * 2 * weights);
  EXPECT_NEAR(static_cast<double>(LlamaModel::estimate_bytes(p, int8)), weights, 0.01 * weights);
  // 2:4 bf16: half the values plus a nibble per group of 4 in the blocks, the embedding dense.
  const double block = weights - 49152.0 * 4096;
  EXPECT_NEAR(static_cast<double>(LlamaModel::estimate_bytes(p, s24)), 2 * 49152.0 * 4096 + block * (1 + 0.125),
              0.001 * weights);
}

}  // namespace
}  // namespace nmkit
