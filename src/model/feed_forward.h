// The feed-forward half of a block (docs/design.md 11.2 and 11.8): x += post(Wdown . (act(Wgate . u) *
// (Wup . u))) with u = rmsnorm(x) * ffn_norm, act the family's (SiLU or GELU-tanh), post its norm of
// the output (Gemma 3) or none.
#pragma once

#include <cstdint>

#include "model/forward_common.h"

namespace nmkit::model {

// Runs block b's feed-forward on the n tokens in s.x in place. The hook, when set, sees the inputs
// of gate/up and of down.
Status feed_forward(const LlamaModel::Impl& m, const Block& block, int64_t b, Scratch& s, int64_t n,
                    const LinearHook* hook);

}  // namespace nmkit::model
