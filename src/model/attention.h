// The attention half of a block (docs/design.md 11.2 and 11.8): x += post(Wo . attn(rmsnorm(x) *
// attn_norm)), with the family's q/k/v biases and q/k norms, rope (NORM or NEOX, the layer's base) on
// q and k, the new keys and values stored in the cache, and grouped-query causal attention over the
// cached positions (the last sliding_window of them in a local layer); post: the family's norm of
// the output (Gemma 3), else none.
#pragma once

#include <cstdint>

#include "model/forward_common.h"
#include "model/kv_cache.h"

namespace nmkit::model {

// Runs block b's attention on the n tokens in s.x (rows of n_embd) in place; s.cos_sin holds each
// token's rope angles. The hook, when set, sees the inputs of qkv and of the output projection.
Status attention(const LlamaModel::Impl& m, const Block& block, int64_t b, Scratch& s, int64_t n,
                 const Positions& at, const KvLayer& kv, const LinearHook* hook);

// Each token's rope angles (cos, sin per pair) into s.cos_sin, and those of local layers into
// s.cos_sin_local when the model has them.
void compute_angles(const LlamaParams& p, int64_t n, const Positions& at, Scratch& s);

}  // namespace nmkit::model
