// The feed-forward half of a llama block (docs/design.md 11.2): x += Wdown . (silu(Wgate . u) *
// (Wup . u)) with u = rmsnorm(x) * ffn_norm.
#pragma once

#include <cstdint>

#include "model/forward_common.h"

namespace nmkit::model {

// Runs block b's feed-forward on the n tokens in s.x in place. The hook, when set, sees the inputs
// of gate/up and of down.
Status feed_forward(const LlamaModel::Impl& m, const Block& block, int64_t b, Scratch& s, int64_t n,
                    const LinearHook* hook);

}  // namespace nmkit::model
